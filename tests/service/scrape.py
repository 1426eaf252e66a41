#!/usr/bin/env python3
"""Reads the camera service's endpoint as a monitoring system would, and prints one JSON object.

    scrape.py http://HOST:PORT/metrics  ->  {"status": 200, "metrics": {NAME[,LABEL=V]: {CAMERA: V}}}
    scrape.py http://HOST:PORT/health   ->  {"status": 200|503, "health": {...}}
    scrape.py http://HOST:PORT/PICTURE  ->  {"status": 200, "jpeg": {"bytes": N, "width": W, "height": H}}
    scrape.py http://HOST:PORT/CLIP     ->  {"status": 200, "mp4": {"bytes": N, "range": {"status": 206,
                                             "bytes": 100, "content_range": "bytes 100-199/N"}}}
                                            (the range asked again as a browser seeking does)

/metrics goes through the Prometheus client's own parser (Debian's python3-prometheus-client),
so that a line it would refuse fails the test.
"""
import json
import math
import sys
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def jpeg_size(data):
    """A JPEG's width and height from its start-of-frame segment; None when it is no JPEG."""
    if data[:2] != b"\xff\xd8":
        return None
    at = 2
    while at + 9 < len(data) and data[at] == 0xFF:
        marker, length = data[at + 1], int.from_bytes(data[at + 2:at + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2):
            return int.from_bytes(data[at + 7:at + 9], "big"), int.from_bytes(data[at + 5:at + 7], "big")
        at += 2 + length
    return None


def main():
    url = sys.argv[1]
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            status, raw, kind = response.status, response.read(), response.headers.get_content_type()
    except urllib.error.HTTPError as error:
        status, raw, kind = error.code, error.read(), error.headers.get_content_type()
    if kind == "image/jpeg":
        size = jpeg_size(raw)
        print(json.dumps({"status": status, "jpeg": {"bytes": len(raw), "width": size and size[0],
                                                     "height": size and size[1]}}))
        return
    if kind == "video/mp4":
        ask = urllib.request.Request(url, headers={"Range": "bytes=100-199"})
        with urllib.request.urlopen(ask, timeout=5) as part:
            ranged = {"status": part.status, "bytes": len(part.read()),
                      "content_range": part.headers.get("Content-Range")}
        print(json.dumps({"status": status, "mp4": {"bytes": len(raw), "range": ranged}}))
        return
    body = raw.decode()
    if not url.endswith("/metrics"):
        print(json.dumps({"status": status, "health": json.loads(body)}))
        return
    metrics = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            labels = sorted((k, v) for k, v in sample.labels.items() if k != "camera")
            key = sample.name + "".join(",%s=%s" % (k, v) for k, v in labels)
            value = None if math.isnan(sample.value) else sample.value
            metrics.setdefault(key, {})[sample.labels.get("camera", "")] = value
    print(json.dumps({"status": status, "metrics": metrics}))


if __name__ == "__main__":
    main()
