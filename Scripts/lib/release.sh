# The host's release tools (locus, locus-bench, locus-fleet, locus-sim), sourced by the scripts that run them.
# They are built in a scratch folder of their own, .build-release, not .build: a `swift test`
# holds .build's lock for as long as its tests run, and Scripts/test builds and benchmarks the
# release tools while the host suite runs.
#
#   release_tool PRODUCT   builds PRODUCT (release, incremental) and prints the binary's path;
#                          the build's output only when it fails

release_tool() {
    local product="$1" root scratch log
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    scratch="$root/.build-release"
    mkdir -p "$scratch"
    log="$scratch/build-$product.log"
    if ! (cd "$root" && swift build -c release --scratch-path "$scratch" --product "$product") >"$log" 2>&1; then
        grep -v "^warning: 'main'" "$log" >&2
        echo "release build of $product failed (log: $log)" >&2
        return 1
    fi
    echo "$scratch/release/$product"
}
