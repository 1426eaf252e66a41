"""The camera service as the GPU-host tools run it: pipelines/service on a config written in a
work folder, its log there, and the base URL of its endpoint once it listens."""
import os
import re
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start_service(config_text, work, seconds=60):
    """Writes WORK/cameras.conf and starts the service on it (stderr in WORK/service.err).
    Returns (process, "http://HOST:PORT"), or (None, None) after killing it when it did not
    listen within `seconds`."""
    config = os.path.join(work, "cameras.conf")
    with open(config, "w") as f:
        f.write(config_text)
    log = open(os.path.join(work, "service.err"), "w+")
    service = subprocess.Popen([os.path.join(ROOT, "pipelines", "service"), "--config", config],
                               stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and service.poll() is None:
        time.sleep(0.2)
        log.seek(0)
        found = re.search(r"metrics at (http://\S+)/metrics", log.read())
        if found:
            return service, found.group(1)
    service.kill()
    service.wait()
    return None, None
