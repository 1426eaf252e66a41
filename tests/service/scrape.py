#!/usr/bin/env python3
"""Reads the camera service's endpoint as a monitoring system would, and prints one JSON object.

    scrape.py http://HOST:PORT/metrics  ->  {"status": 200, "metrics": {NAME[,LABEL=V]: {CAMERA: V}}}
    scrape.py http://HOST:PORT/health   ->  {"status": 200|503, "health": {...}}

/metrics goes through the Prometheus client's own parser (Debian's python3-prometheus-client),
so that a line it would refuse fails the test.
"""
import json
import math
import sys
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def main():
    url = sys.argv[1]
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            status, body = response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read().decode()
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
