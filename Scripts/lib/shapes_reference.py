#!/usr/bin/env python3
"""The outside reference for polygon and corridor conditions (ShapeReferenceTests).

Reads JSON lines from standard input, one shape each with the agent's answers for its points:
  {"class": NAME, "kind": "polygon"|"corridor", "vertices": [[lat, lon], ...], "width": W,
   "small": true|false, "points": [[lat, lon, inside, boundary_distance, foot_lat, foot_lon,
   foot_is_vertex, edge_azimuth_at_foot, distance_to_foot], ...]}
(a corridor's boundary distance is |distance to the path - width/2|; its foot is on the path)
and prints one JSON object: per class, how many points were compared and how they agreed.

- Distances (every class): GeographicLib's inverse problem (Karney's Python geodesics) from the
  point to the foot the agent found on the nearest edge must give the agent's distance, and the
  geodesic from the point must meet the edge at a right angle there (unless the foot is a vertex):
  together they say the foot is where the distance to that edge is least (the angle's error
  bounds how much less the least distance could be: foot_excess_max_m).
- Containment and boundary distance (small shapes): shapely (GEOS) in the azimuthal equidistant
  projection about the shape's first vertex, computed with GeographicLib. There a geodesic edge
  of a shape under a few kilometres is straight to well under a millimetre, so the points farther
  than the stated band from the boundary must be decided as the agent decided them, and the
  distances must agree to the band.
"""
import json
import math
import sys

from geographiclib.geodesic import Geodesic
import shapely
from shapely.geometry import LineString, Point, Polygon

WGS84 = Geodesic.WGS84
INVERSE = Geodesic.DISTANCE | Geodesic.AZIMUTH


def band_m(size_m):
    """The tolerance band at the boundary: 1 mm, and a millionth of the shape's size."""
    return 1e-3 + 1e-6 * size_m


def project(origin, lat, lon):
    """Azimuthal equidistant coordinates (metres east, north) of lat, lon about origin."""
    g = WGS84.Inverse(origin[0], origin[1], lat, lon, INVERSE)
    azimuth = math.radians(g["azi1"])
    return (g["s12"] * math.sin(azimuth), g["s12"] * math.cos(azimuth))


def main():
    classes = {}
    for line in sys.stdin:
        shape = json.loads(line)
        figures = classes.setdefault(shape["class"], {
            "points": 0, "distance_checked": 0, "distance_max_error_m": 0.0, "right_angle_max_error_deg": 0.0, "foot_excess_max_m": 0.0,
            "containment_compared": 0, "in_band": 0, "disagreements": 0, "shapely_distance_max_error_m": 0.0,
            "inside": 0, "examples": []})
        vertices = shape["vertices"]
        for lat, lon, inside, distance, foot_lat, foot_lon, foot_is_vertex, edge_azimuth, foot_distance in shape["points"]:
            figures["points"] += 1
            figures["inside"] += 1 if inside else 0
            g = WGS84.Inverse(lat, lon, foot_lat, foot_lon, INVERSE)
            figures["distance_max_error_m"] = max(figures["distance_max_error_m"], abs(g["s12"] - foot_distance))
            figures["distance_checked"] += 1
            if not foot_is_vertex and g["s12"] > 1e-3:
                # The geodesic from the point arrives at the foot along azi2; the edge runs along
                # edge_azimuth there: they meet at 90 degrees (either side).
                angle = abs(((g["azi2"] - edge_azimuth) + 180) % 360 - 180)
                error = abs(angle - 90)
                figures["right_angle_max_error_deg"] = max(figures["right_angle_max_error_deg"], error)
                # A foot off the true one by d along the edge gives a distance d^2 / 2s too long:
                # with the angle's error e, d = s sin e, so the agent's distance can exceed the
                # least distance by at most s sin^2(e) / 2.
                excess = g["s12"] * math.sin(math.radians(error)) ** 2 / 2
                figures["foot_excess_max_m"] = max(figures["foot_excess_max_m"], excess)
        if not shape["small"]:
            continue
        origin = vertices[0]
        projected = [project(origin, lat, lon) for lat, lon in vertices]
        size = max(math.hypot(x, y) for x, y in projected)
        if shape["kind"] == "polygon":
            geometry = Polygon(projected)
            boundary = geometry.exterior
        else:
            geometry = LineString(projected)
            boundary = geometry
        shapely.prepare(geometry)
        points = shape["points"]
        xy = [project(origin, p[0], p[1]) for p in points]
        pts = shapely.points(xy)
        edge_distances = shapely.distance(boundary, pts)
        if shape["kind"] == "polygon":
            reference_inside = shapely.contains(geometry, pts) | shapely.touches(geometry, pts)
            reference_distance = edge_distances
        else:
            half = shape["width"] / 2
            reference_inside = edge_distances <= half
            reference_distance = abs(edge_distances - half)
        band = band_m(size + shape.get("width", 0))
        for index, point in enumerate(points):
            lat, lon, inside, distance = point[0], point[1], point[2], point[3]
            figures["shapely_distance_max_error_m"] = max(figures["shapely_distance_max_error_m"],
                                                          abs(float(reference_distance[index]) - distance))
            if distance <= band or float(reference_distance[index]) <= band:
                figures["in_band"] += 1
                continue
            figures["containment_compared"] += 1
            if bool(reference_inside[index]) != bool(inside):
                figures["disagreements"] += 1
                if len(figures["examples"]) < 5:
                    figures["examples"].append({"point": [lat, lon], "agent_inside": inside, "agent_distance": distance,
                                                "shapely_distance": float(reference_distance[index])})
    json.dump(classes, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
