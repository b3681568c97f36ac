#!/usr/bin/env python3
"""Offline geocoding against outside references (driven by Scripts/test-geocoding).

  geocoding_oracle.py check --locus CMD --index IDX --label LABEL SOURCE... [--points N] [--names N]
                            [--seed N] [--device NAME=CMD]... [--device-points N] [--refusals]

SOURCE... are the files the index was built from (GeoNames gazetteers, admin1CodesASCII.txt, a
site's places TSV), read here on their own, as `locus geo index` documents them. Checks:

- reverse: N seeded points, half uniform on the sphere, half within 20 km of a few cities (and of
  the antimeridian off Fiji), plus the poles, the antimeridian and a few places' own positions,
  against the nearest place by GeographicLib's geodesic (Geodesic.WGS84.Inverse, Karney) over
  every place of the same sources. Exhaustive and fast: numpy computes the chord (ECEF on the
  WGS84 ellipsoid, height 0) from the point to every place; a geodesic is never shorter than its
  chord, so the nearest place is among those whose chord is at most the geodesic distance of the
  place with the shortest chord (+1 cm), and only those are solved. Coordinates are the index's
  (round(x * 1e7) / 1e7). Required: the same place, unless the two are within 1 mm of each other;
  the distance within 1 mm of GeographicLib's s12; the bearing within 0.01 degree of azi1 (unless
  the point is within 1 mm of the place); every field of the answer; of places on one spot, the
  site's, then the most populous. Again with
  `--scope populated --within 20000` (nearest gazetteer place of class P, or null beyond 20 km)
  and with `--scope site` (points around the site, when there is one);
- folding: every name, ASCII name, alternate name and alias through `locus geo fold`, equal to
  Python's own fold D(D(s).casefold()), D = NFKD without category Mn (names holding a code point
  this Python's Unicode does not assign are counted and left out);
- forward: each name (or --names N of them, a seeded sample, for folding too) queried: `total` and the candidate
  list are exactly the places having that folded key (Python's fold, trimmed of spaces), site
  places first, then population descending (places of one rank compared as a multiset);
- --refusals: a truncated copy, flipped bytes, an empty file and a GeoNames TSV given as --index
  make `locus geo reverse` exit non-zero with one line naming the reason;
- --device NAME=CMD: the device binary (CMD, e.g. "qemu-aarch64-static dist/locus-linux-aarch64")
  answers a sample of reverse points and names byte for byte as the host binary does.

Prints 'ok    ...' or 'FAIL  ...' a check, details indented, and 'row<TAB>label<TAB>what<TAB>count
<TAB>seconds' lines for the caller's table of timings. Exits 1 when a check failed. Runs in the
venv of Scripts/install-deps --test (geographiclib 2.1, numpy).
"""
import argparse
import collections
import json
import math
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
import unicodedata

import numpy as np
from geographiclib.geodesic import Geodesic

WGS84 = Geodesic.WGS84
A = 6378137.0
F = 1 / 298.257223563
E2 = F * (2 - F)
FIELDS = ("name", "admin1", "country", "time_zone", "population", "geonameid", "site", "latitude", "longitude")
CLUSTERS = [  # (label, latitude, longitude): points within 20 km
    ("Bremerhaven", 53.5396, 8.5809),
    ("Tokyo", 35.6895, 139.6917),
    ("São Paulo", -23.5475, -46.6361),
    ("Reykjavík", 64.1355, -21.8954),
    ("Suva", -18.1416, 178.4415),
    ("antimeridian off Vanua Levu", -16.75, 180.0),
]
WITHIN_M = 20000.0

failures = 0


def ok(description):
    print(f"ok    {description}", flush=True)


def fail(description, details=()):
    global failures
    failures += 1
    print(f"FAIL  {description}", flush=True)
    for line in list(details)[:20]:
        print(f"      {line}", flush=True)


def check(condition, description, details=()):
    if condition:
        ok(description)
    else:
        fail(description, details)


def row(label, what, count, seconds):
    print(f"row\t{label}\t{what}\t{count}\t{seconds:.1f}", flush=True)


# --- folding ----------------------------------------------------------------------------------

def D(t):
    return "".join(c for c in unicodedata.normalize("NFKD", t) if unicodedata.category(c) != "Mn")


def fold(s):
    return D(D(s).casefold())


def unassigned(s):
    return any(unicodedata.category(c) == "Cn" for c in s)


# --- the sources, read as `locus geo index` reads them -----------------------------------------

def fixed(degrees):
    """Int32((degrees * 1e7).rounded()), Swift's rounding: to nearest, ties away from zero."""
    v = degrees * 1e7
    a = abs(v)
    n = math.floor(a)
    if a - n >= 0.5:
        n += 1
    return -int(n) if v < 0 else int(n)


class Place:
    __slots__ = ("number", "name", "names", "lat7", "lon7", "feature_class", "country", "admin1_code", "admin1",
                 "population", "geonameid", "time_zone", "site", "keys")

    def ident(self):
        return (self.geonameid, self.name, self.lat7, self.lon7)

    @property
    def latitude(self):
        return self.lat7 / 1e7

    @property
    def longitude(self):
        return self.lon7 / 1e7

    def fields(self):
        """The reverse and forward answers' fields for this place, as PlaceJSON writes them."""
        out = {"name": self.name}
        if self.admin1:
            out["admin1"] = self.admin1
        if len(self.country) == 2:
            out["country"] = self.country
        if self.time_zone:
            out["time_zone"] = self.time_zone
        out["population"] = self.population
        if self.geonameid:
            out["geonameid"] = self.geonameid
        out["site"] = self.site
        out["latitude"] = self.lat7
        out["longitude"] = self.lon7
        return out


def file_kind(lines):
    for line in lines:
        if line and not line.startswith("#"):
            fields = line.split("\t")
            if len(fields) == 19:
                return "geonames"
            if len(fields) == 4 and len(fields[0]) > 3 and fields[0][2] == "." and not is_number(fields[1]):
                return "admin1"
            if len(fields) in (3, 4):
                return "site"
            return None
    return None


def is_number(text):
    if not text or any(c not in "0123456789.-+" for c in text):
        return False
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def read_sources(paths):
    gazetteer, site, admin1 = [], [], {}
    for path in paths:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8")
        lines = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
        kind = file_kind(lines)
        rows = 0
        for line in lines:
            if not line or line.startswith("#"):
                continue
            rows += 1
            f = line.split("\t")
            if kind == "admin1":
                admin1[f[0]] = f[1]
            elif kind == "geonames":
                p = Place()
                p.name, p.site = f[1], False
                p.names = [f[1]] + ([f[2]] if f[2] else []) + [a for a in f[3].split(",") if a]
                p.lat7, p.lon7 = fixed(float(f[4])), fixed(float(f[5]))
                p.feature_class = f[6][:1] or " "
                p.country, p.admin1_code = f[8], f[10]
                p.population = min(int(f[14]), 2**32 - 1) if f[14] else 0
                p.geonameid, p.time_zone = int(f[0]), f[17]
                gazetteer.append(p)
            elif kind == "site":
                if rows == 1 and f[0] == "name":
                    continue
                p = Place()
                p.name, p.site = f[0], True
                p.names = [f[0]] + ([a.strip(" ") for a in f[3].split(",") if a.strip(" ")] if len(f) == 4 else [])
                p.lat7, p.lon7 = fixed(float(f[1])), fixed(float(f[2]))
                p.feature_class, p.country, p.admin1_code = "S", "", ""
                p.population, p.geonameid, p.time_zone = 0, 0, ""
                site.append(p)
            else:
                sys.exit(f"geocoding_oracle: {path}: not a gazetteer file this script knows")
    places = gazetteer + site
    for number, p in enumerate(places):
        p.number = number
        p.admin1 = admin1.get(f"{p.country}.{p.admin1_code}", "") if p.country and p.admin1_code else ""
        keys = []
        for name in p.names:
            key = fold(name).strip(" ")
            if key and len(key.encode()) <= 0xFFFF and key not in keys:
                keys.append(key)
        p.keys = keys
    return places


# --- running locus ----------------------------------------------------------------------------

def run_locus(command, arguments, input_path):
    with open(input_path, "rb") as stdin:
        result = subprocess.run(command + arguments, stdin=stdin, capture_output=True)
    return result


# --- reverse ----------------------------------------------------------------------------------

def ecef(lat_deg, lon_deg):
    lat, lon = np.radians(lat_deg), np.radians(lon_deg)
    sin_lat = np.sin(lat)
    n = A / np.sqrt(1 - E2 * sin_lat * sin_lat)
    return n * np.cos(lat) * np.cos(lon), n * np.cos(lat) * np.sin(lon), n * (1 - E2) * sin_lat


def make_points(count, seed, places):
    """(label, latitude, longitude): half uniform on the sphere, half around the clusters, then the
    special points."""
    rng = random.Random(seed)
    points = []
    for _ in range(count // 2):
        points.append(("world", math.degrees(math.asin(2 * rng.random() - 1)), rng.random() * 360 - 180))
    dense = count - count // 2
    for i in range(dense):
        label, lat0, lon0 = CLUSTERS[i % len(CLUSTERS)]
        distance = 20000 * math.sqrt(rng.random())
        direct = WGS84.Direct(lat0, lon0, rng.random() * 360 - 180, distance)
        lon = math.remainder(direct["lon2"], 360.0)
        if lon >= 180:
            lon -= 360
        points.append((label, direct["lat2"], lon))
    special = [(90.0, 0.0), (-90.0, 0.0), (0.0, 0.0), (0.0, 180.0), (0.0, -180.0), (-16.75, -179.9999999)]
    points += [("special", lat, lon) for lat, lon in special]
    for p in places:
        if p.site or p.name in ("Bremerhaven", "Bremen", "Suva", "Reykjavík"):
            points.append(("at a place", p.latitude, p.longitude))
    return points


class Nearest:
    """Brute-force nearest place by GeographicLib over a set of places."""

    def __init__(self, places):
        self.places = places
        lat = np.array([p.latitude for p in places], dtype=np.float64)
        lon = np.array([p.longitude for p in places], dtype=np.float64)
        self.x, self.y, self.z = ecef(lat, lon)
        self.solved = 0

    def solve(self, place, lat, lon):
        self.solved += 1
        g = WGS84.Inverse(place.latitude, place.longitude, lat, lon, Geodesic.DISTANCE | Geodesic.AZIMUTH)
        return g["s12"], g["azi1"] % 360.0

    def __call__(self, lat, lon):
        """(place, s12, azimuth, {number: (s12, azimuth)} of the places solved), or None."""
        if not self.places:
            return None
        px, py, pz = ecef(lat, lon)
        dx, dy, dz = self.x - px, self.y - py, self.z - pz
        squared = dx * dx + dy * dy + dz * dz
        first = int(np.argmin(squared))
        s0, _ = self.solve(self.places[first], lat, lon)
        reach = s0 + 0.01
        solved = {}
        for i in np.nonzero(squared <= reach * reach)[0]:
            place = self.places[int(i)]
            solved[place.number] = self.solve(place, lat, lon)
        best = min(solved, key=lambda number: solved[number][0])
        return best, solved[best][0], solved[best][1], solved


def parse(line):
    """The JSON value of one output line, or an error naming the line."""
    try:
        return json.loads(line), None
    except (ValueError, UnicodeDecodeError) as error:
        return None, f"not JSON ({error}): {line[:300]!r}"


def angle_error(a, b):
    d = abs(a - b) % 360.0
    return min(d, 360.0 - d)


def field_errors(answer, place):
    expected = place.fields()
    got = {key: answer[key] for key in FIELDS if key in answer}
    got["latitude"] = round(answer["latitude"] * 1e7)
    got["longitude"] = round(answer["longitude"] * 1e7)
    return [] if got == expected else [f"fields {got} != {expected}"]


def reverse(args, places, by_ident, tmp, label):
    points = make_points(args.points, args.seed, places)
    path = os.path.join(tmp, "points.txt")
    with open(path, "w") as out:
        for _, lat, lon in points:
            out.write(f"{lat!r} {lon!r}\n")
    all_places = Nearest(places)
    gazetteer_p = Nearest([p for p in places if not p.site and p.feature_class == "P"])
    site = Nearest([p for p in places if p.site])
    runs = [("any", [], points, all_places, math.inf)]
    runs.append(("populated, within 20 km", ["--scope", "populated", "--within", str(int(WITHIN_M))], points, gazetteer_p, WITHIN_M))
    if site.places:
        near_site = [pt for pt in points if pt[0] in ("Bremerhaven", "at a place")] + points[:200]
        site_path = os.path.join(tmp, "points-site.txt")
        with open(site_path, "w") as out:
            for _, lat, lon in near_site:
                out.write(f"{lat!r} {lon!r}\n")
        runs.append(("site", ["--scope", "site"], near_site, site, math.inf))
    for scope, flags, pts, nearest, within in runs:
        input_path = path if pts is points else site_path
        started = time.monotonic()
        result = run_locus(args.locus, ["geo", "reverse", "--batch", "--index", args.index] + flags, input_path)
        row(label, f"locus geo reverse --batch ({scope})", len(pts), time.monotonic() - started)
        lines = result.stdout.decode("utf-8").splitlines()
        if result.returncode != 0 or len(lines) != len(pts):
            fail(f"{label}: reverse ({scope}): {len(pts)} points: exit {result.returncode}, {len(lines)} lines",
                 result.stderr.decode(errors="replace").splitlines())
            continue
        started = time.monotonic()
        nearest.solved = 0
        problems = []
        counts = collections.Counter()
        max_distance, max_bearing, max_tie = 0.0, 0.0, 0.0
        ties = []
        for (kind, lat, lon), line in zip(pts, lines):
            answer, error = parse(line)
            if error:
                problems.append(f"{kind} {lat!r} {lon!r}: {error}")
                continue
            truth = nearest(lat, lon)
            where = f"{kind} {lat!r} {lon!r}"
            if truth is None or truth[1] > within + 0.001:
                if answer is not None:
                    problems.append(f"{where}: {answer['name']} at {answer['distance_m']} m, expected null")
                counts["null"] += 1
                continue
            best, s_best, _, solved = truth
            if answer is None:
                if truth[1] < within - 0.001:
                    problems.append(f"{where}: null, expected {places[best].name} at {s_best} m")
                counts["null"] += 1
                continue
            ident = (answer.get("geonameid", 0), answer["name"], round(answer["latitude"] * 1e7), round(answer["longitude"] * 1e7))
            number = by_ident.get(ident)
            if number is None:
                problems.append(f"{where}: an answer that is no place of the sources: {line}")
                continue
            problems += [f"{where}: {e}" for e in field_errors(answer, places[number])]
            s, azimuth = solved[number] if number in solved else nearest.solve(places[number], lat, lon)
            if places[number].ident() != places[best].ident():
                tie = abs(s - s_best)
                max_tie = max(max_tie, tie)
                counts["tie"] += 1
                ties.append(f"{where}: {answer['name']} ({s:.4f} m), GeographicLib's first {places[best].name} ({s_best:.4f} m)")
                if tie > 0.001:
                    problems.append(f"{where}: {answer['name']} at {s} m, GeographicLib's nearest {places[best].name} at {s_best} m")
                # Places on one spot: the site's, then the most populous.
                spot = (places[number].lat7, places[number].lon7)
                if min(rank(places[n]) for n in solved if (places[n].lat7, places[n].lon7) == spot) != rank(places[number]):
                    problems.append(f"{where}: {answer['name']} of several places on one spot, not the first by site and population")
            else:
                counts["same"] += 1
            error = abs(answer["distance_m"] - s)
            max_distance = max(max_distance, error)
            if error > 0.001:
                problems.append(f"{where}: distance {answer['distance_m']} m, GeographicLib {s!r} m")
            if s >= 0.001:
                error = angle_error(answer["bearing_deg"], azimuth)
                max_bearing = max(max_bearing, error)
                if error > 0.01:
                    problems.append(f"{where}: bearing {answer['bearing_deg']}, GeographicLib azi1 {azimuth!r}")
            else:
                counts["at the place"] += 1
        row(label, f"GeographicLib nearest ({scope}; {nearest.solved} inverses)", len(pts), time.monotonic() - started)
        summary = (f"{len(pts)} points: {counts['same']} same place, {counts['tie']} other place within 1 mm, {counts['null']} null, "
                   f"{counts['at the place']} at the place; max |distance - s12| {max_distance * 1000:.4f} mm, "
                   f"max bearing error {max_bearing:.6f} deg, {nearest.solved / len(pts):.2f} inverses a point")
        check(not problems, f"{label}: reverse ({scope}) vs GeographicLib: {summary}",
              problems + ([f"... {len(problems)} problems"] if len(problems) > 20 else []))
        for tie in ties[:5]:
            print(f"      tie: {tie}", flush=True)
    return points


# --- names ------------------------------------------------------------------------------------

def names_of(places):
    seen = set()
    names = []
    for p in places:
        for name in p.names:
            if name not in seen and "\n" not in name and not name.endswith("\r"):
                seen.add(name)
                names.append(name)
    return names


def folding(args, names, tmp, label):
    path = os.path.join(tmp, "names.txt")
    with open(path, "wb") as out:
        out.write("".join(name + "\n" for name in names).encode("utf-8"))
    started = time.monotonic()
    result = run_locus(args.locus, ["geo", "fold"], path)
    row(label, "locus geo fold", len(names), time.monotonic() - started)
    folded = result.stdout.split(b"\n")
    if folded and folded[-1] == b"":
        folded.pop()
    if result.returncode != 0 or len(folded) != len(names):
        fail(f"{label}: locus geo fold: exit {result.returncode}, {len(folded)} lines for {len(names)} names")
        return
    mismatches, skipped = [], 0
    for name, got in zip(names, folded):
        if unassigned(name):
            skipped += 1
            continue
        expected = fold(name).encode("utf-8")
        if got != expected:
            mismatches.append(f"{name!r}: locus {got!r} ({got.hex()}), Python {expected!r} ({expected.hex()})")
    check(not mismatches, f"{label}: locus geo fold equals Python's fold (Unicode {unicodedata.unidata_version}) on "
          f"{len(names) - skipped} names ({len(mismatches)} differ; {skipped} hold code points this Python does not assign)",
          mismatches)


def rank(place):
    return (not place.site, -place.population)


def model_search(query, by_key, places):
    """(error, [place numbers]) for a query as PlaceNameSearch documents it: the whole text as one
    name first; if no place has it and it holds a comma, the first part is the name and each
    further non-empty part (at most 4) must equal the place's country code or admin1 name, folded.
    A part folding to over 256 bytes is refused."""
    whole = fold(query)
    if len(whole.encode()) > 256:
        return "too long", []
    key = whole.strip(" ")
    if not key:
        return "empty", []
    if key in by_key or "," not in query:
        return None, by_key.get(key, [])
    parts = query.split(",")
    name = fold(parts[0])
    if len(name.encode()) > 256:
        return "too long", []
    name = name.strip(" ")
    if not name:
        return "empty", []
    qualifiers = []
    for part in parts[1:]:
        folded = fold(part)
        if len(folded.encode()) > 256:
            return "too long", []
        folded = folded.strip(" ")
        if not folded:
            continue
        if len(qualifiers) == 4:
            return "too long", []
        qualifiers.append(folded)

    def matches(place):
        for qualifier in qualifiers:
            if len(place.country) == 2 and qualifier == place.country.lower():
                continue
            if place.admin1 and fold(place.admin1).strip(" ") == qualifier:
                continue
            return False
        return True
    return None, [n for n in by_key.get(name, []) if matches(places[n])]


def qualified_queries(places, count, seed):
    """Names with country codes and admin1 names after commas, right and wrong, for a sample of
    the gazetteer's places."""
    rng = random.Random(seed)
    sample = rng.sample([p for p in places if not p.site and len(p.country) == 2], min(count, len(places)))
    queries = []
    for p in sample:
        name = rng.choice(p.names)
        if "\n" in name or name.endswith("\r"):
            continue
        queries += [f"{name}, {p.country}", f"{name},, {p.country.lower()} ,", f"{name}, XX"]
        if p.admin1:
            queries += [f"{name}, {p.admin1}", f"{name.upper()} , {p.admin1.lower()} , {p.country}",
                        f"{name}, {p.admin1}, {p.country}, {p.admin1}, {p.country}, {p.country}"]
    return queries


def compare_candidates(query, answer, expected, places, by_ident, checked_fields, problems):
    """Whether the answer lists exactly `expected`, ranked; problems appended."""
    got = []
    for item in answer["places"]:
        ident = (item.get("geonameid", 0), item["name"], round(item["latitude"] * 1e7), round(item["longitude"] * 1e7))
        number = by_ident.get(ident)
        if number is None:
            problems.append(f"{query!r}: a candidate that is no place of the sources: {item}")
            return False
        got.append(number)
        if number not in checked_fields:
            checked_fields.add(number)
            problems += [f"{query!r}: {e}" for e in field_errors(item, places[number])]
    identities = lambda numbers: collections.Counter(places[n].ident() for n in numbers)
    ranks = [rank(places[n]) for n in got]
    if answer["total"] != len(expected) or identities(got) != identities(expected):
        problems.append(f"{query!r}: total {answer['total']}, {len(got)} places "
                        f"{sorted(places[n].name + '/' + places[n].country for n in got)[:8]}; "
                        f"expected {len(expected)} {sorted(places[n].name + '/' + places[n].country for n in expected)[:8]}")
        return False
    if ranks != sorted(ranks):
        problems.append(f"{query!r}: ranked {[(places[n].name, places[n].site, places[n].population) for n in got][:8]}")
        return False
    return True


def forward(args, places, by_ident, names, tmp, label):
    by_key = collections.defaultdict(list)
    for p in places:
        for key in p.keys:
            by_key[key].append(p.number)
    queries = names
    path = os.path.join(tmp, "queries.txt")
    with open(path, "wb") as out:
        out.write("".join(q + "\n" for q in queries).encode("utf-8"))
    started = time.monotonic()
    with open(path, "rb") as stdin:
        process = subprocess.Popen(args.locus + ["geo", "forward", "--batch", "--index", args.index], stdin=stdin,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        lines = process.stdout.read().split(b"\n")
        errors = process.stderr.read()
        status = process.wait()
    row(label, "locus geo forward --batch", len(queries), time.monotonic() - started)
    if lines and lines[-1] == b"":
        lines.pop()
    if status != 0 or len(lines) != len(queries):
        fail(f"{label}: forward: exit {status}, {len(lines)} lines for {len(queries)} names",
             errors.decode(errors="replace").splitlines())
        return
    started = time.monotonic()
    problems = []
    counts = collections.Counter()
    checked_fields = set()
    for query, line in zip(queries, lines):
        answer, error = parse(line)
        if error:
            problems.append(f"{query!r}: {error}")
            continue
        folded = fold(query)
        if answer.get("query") != query:
            problems.append(f"{query!r}: the answer's query is {answer.get('query')!r}")
        if len(folded.encode()) > 256:
            counts["too long"] += 1
            if "error" not in answer or answer["total"] != 0:
                problems.append(f"{query!r}: folds to {len(folded.encode())} bytes, expected the error for names over 256")
            continue
        if unassigned(query):
            counts["unassigned"] += 1
            continue
        if not folded.strip(" "):
            counts["empty"] += 1
            if "error" not in answer or answer["total"] != 0:
                problems.append(f"{query!r}: folds to nothing, expected the error for an empty name")
            continue
        expected = by_key.get(folded.strip(" "), [])
        if not expected:
            problems.append(f"{query!r}: no place has the key {folded.strip(' ')!r} (Python's fold)")
        elif compare_candidates(query, answer, expected, places, by_ident, checked_fields, problems):
            counts["ambiguous" if len(expected) > 1 else "one place"] += 1
            if len(expected) > 1 and any(places[n].site for n in expected) and not all(places[n].site for n in expected):
                counts["site and gazetteer"] += 1
    row(label, "forward vs the folded keys", len(queries), time.monotonic() - started)
    check(not problems, f"{label}: forward finds every name's places, ranked: {len(queries)} names "
          f"({counts['one place']} of one place, {counts['ambiguous']} shared by several, {counts['site and gazetteer']} "
          f"by a site place and the gazetteer's; {counts['too long']} over 256 bytes and {counts['empty']} folding to nothing refused; {counts['unassigned']} unassigned skipped)",
          problems + ([f"... {len(problems)} problems"] if len(problems) > 20 else []))

    # Qualifiers: "NAME, COUNTRY", "NAME, ADMIN1, ...", against the model of the search.
    queries = qualified_queries(places, args.qualified, args.seed)
    path = os.path.join(tmp, "qualified.txt")
    with open(path, "wb") as out:
        out.write("".join(q + "\n" for q in queries).encode("utf-8"))
    started = time.monotonic()
    result = run_locus(args.locus, ["geo", "forward", "--batch", "--index", args.index], path)
    row(label, "locus geo forward --batch (qualified names)", len(queries), time.monotonic() - started)
    lines = result.stdout.split(b"\n")[:-1]
    if result.returncode != 0 or len(lines) != len(queries):
        fail(f"{label}: forward with qualifiers: exit {result.returncode}, {len(lines)} lines for {len(queries)} names")
        return
    problems = []
    counts = collections.Counter()
    for query, line in zip(queries, lines):
        answer, error = parse(line)
        if error:
            problems.append(f"{query!r}: {error}")
            continue
        refusal, expected = model_search(query, by_key, places)
        if refusal:
            counts["refused"] += 1
            if "error" not in answer or answer["total"] != 0:
                problems.append(f"{query!r}: expected the error for a name {refusal}, got {line[:200]!r}")
        elif "error" in answer:
            problems.append(f"{query!r}: {answer['error']}, expected {len(expected)} places")
        elif compare_candidates(query, answer, expected, places, by_ident, checked_fields, problems):
            counts["none" if not expected else "found"] += 1
    check(not problems, f"{label}: forward with qualifiers as modelled: {len(queries)} names ({counts['found']} found, "
          f"{counts['none']} rightly none, {counts['refused']} refused)",
          problems + ([f"... {len(problems)} problems"] if len(problems) > 20 else []))


# --- refusals and device binaries -------------------------------------------------------------

def refusals(args, sources, tmp, label):
    with open(args.index, "rb") as handle:
        good = handle.read()
    rng = random.Random(args.seed)
    with open(sources[0], "rb") as handle:
        tsv = handle.read()
    cases = [("a truncated copy (half)", good[: len(good) // 2], "truncated"),
             ("a truncated copy (header only)", good[:96], "truncated"),
             ("a truncated copy (one byte short)", good[:-1], "truncated"),
             ("an empty file", b"", "not a Locus place index"),
             (f"a GeoNames TSV ({os.path.basename(sources[0])})", tsv, "not a Locus place index")]
    places_at, names_at, strings_at = (int.from_bytes(good[o:o + 8], "little") for o in (40, 48, 56))
    for where, offset, reason in [
            ("in the places", rng.randrange(places_at, names_at), "checksum"),
            ("in the names", rng.randrange(names_at, strings_at), "checksum"),
            ("in the strings", rng.randrange(strings_at, len(good)), "checksum"),
            ("in the last byte", len(good) - 1, "checksum"),
            ("in the checksum field", 24, "checksum"),
            ("in the magic", 0, "not a Locus place index")]:
        flipped = bytearray(good)
        flipped[offset] ^= 1 << rng.randrange(8)
        cases.append((f"one flipped bit {where} (byte {offset})", bytes(flipped), reason))
    for description, data, reason in cases:
        path = os.path.join(tmp, "damaged.idx")
        with open(path, "wb") as out:
            out.write(data)
        result = subprocess.run(args.locus + ["geo", "reverse", "--index", path, "0", "0"], capture_output=True, stdin=subprocess.DEVNULL)
        message = result.stderr.decode(errors="replace")
        lines = message.splitlines()
        check(result.returncode != 0 and len(lines) == 1 and reason in message and not result.stdout,
              f"{label}: {description} is refused: exit {result.returncode}, {lines[0] if lines else 'no message'!r}",
              [f"expected a non-zero exit and one line naming '{reason}'; stdout {result.stdout[:200]!r}", *lines])


def devices(args, points, names, tmp, label):
    rng = random.Random(args.seed + 1)
    sample = rng.sample(points, min(args.device_points, len(points)))
    points_path = os.path.join(tmp, "device-points.txt")
    with open(points_path, "w") as out:
        for _, lat, lon in sample:
            out.write(f"{lat!r} {lon!r}\n")
    queries = rng.sample(names, min(args.device_points, len(names)))
    names_path = os.path.join(tmp, "device-names.txt")
    with open(names_path, "wb") as out:
        out.write("".join(q + "\n" for q in queries).encode("utf-8"))
    jobs = [("geo reverse --batch", ["geo", "reverse", "--batch", "--index", args.index], points_path, len(sample)),
            ("geo forward --batch", ["geo", "forward", "--batch", "--index", args.index], names_path, len(queries))]
    for what, arguments, path, count in jobs:
        host = run_locus(args.locus, arguments, path)
        for device in args.device:
            name, _, command = device.partition("=")
            started = time.monotonic()
            result = run_locus(shlex.split(command), arguments, path)
            row(label, f"{name}: {what}", count, time.monotonic() - started)
            same = result.stdout == host.stdout and result.returncode == host.returncode and host.returncode == 0
            detail = []
            if not same:
                got, want = result.stdout.split(b"\n"), host.stdout.split(b"\n")
                for i, (a, b) in enumerate(zip(got, want)):
                    if a != b:
                        detail = [f"line {i + 1}: {name}: {a[:300]!r}", f"line {i + 1}: host: {b[:300]!r}"]
                        break
                detail.append(f"exit {result.returncode} (host {host.returncode}); {len(got)} lines (host {len(want)})")
                detail += result.stderr.decode(errors="replace").splitlines()[:5]
            check(same, f"{label}: {name} {what} on {count} {'points' if 'reverse' in what else 'names'}: "
                  f"byte-identical to the host build ({len(host.stdout)} bytes)", detail)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["check"])
    parser.add_argument("sources", nargs="+")
    parser.add_argument("--locus", required=True, help="the command that runs locus (split like a shell)")
    parser.add_argument("--index", required=True)
    parser.add_argument("--label", default="index")
    parser.add_argument("--points", type=int, default=10000)
    parser.add_argument("--names", type=int, default=0, help="how many names to query (0: every one)")
    parser.add_argument("--seed", type=int, default=20240612)
    parser.add_argument("--qualified", type=int, default=1000, help="places whose names are queried with qualifiers")
    parser.add_argument("--refusals", action="store_true")
    parser.add_argument("--device", action="append", default=[], help="NAME=COMMAND of a device binary")
    parser.add_argument("--device-points", type=int, default=500)
    args = parser.parse_args()
    args.locus = shlex.split(args.locus)

    started = time.monotonic()
    places = read_sources(args.sources)
    by_ident = {}
    for p in places:
        by_ident.setdefault(p.ident(), p.number)
    row(args.label, "read and fold the sources (Python)", len(places), time.monotonic() - started)
    print(f"  {args.label}: {len(places)} places ({sum(p.site for p in places)} the site's), "
          f"{sum(len(p.keys) for p in places)} folded keys; {len(places) - len(by_ident)} places repeat another's identity", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        points = reverse(args, places, by_ident, tmp, args.label)
        names = names_of(places)
        if args.names and args.names < len(names):
            names = random.Random(args.seed).sample(names, args.names)
        folding(args, names, tmp, args.label)
        forward(args, places, by_ident, names, tmp, args.label)
        if args.refusals:
            refusals(args, args.sources, tmp, args.label)
        if args.device:
            devices(args, points, names, tmp, args.label)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
