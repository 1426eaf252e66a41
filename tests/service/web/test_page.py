#!/usr/bin/env python3
"""The operator's page (service/web/page/) in a real browser: Debian's chromium, headless, driven
through chromedriver by selenium (python3-selenium).

The test starts its own camera server (pipelines/rtsp-server: videotestsrc's ball, which
crosses the middle of the frame once each way every 10 s) and the service with two cameras of
it, a line through the middle and brightspot as the detector (a test plugin, cheap on CI's two
cores), then opens the page and checks, each within a bound:
  - both cameras are listed, streaming;
  - each camera's picture loads, and a newer one replaces it;
  - a count on the line rises on the page as the ball crosses, and the event is listed; the
    history (the service's `history` key) searched on the page lists the camera's crossings and
    charts them per hour, and an event's picture (the `snapshots` key) shows when asked for;
  - changes the page's API refuses, each with its reason and nothing saved: a wrong key, a line
    off the picture, one of no length, a bad name, a body without lines, a zone whose edges
    cross, one off the picture, no such camera;
  - a line drawn on cam2's picture with the mouse (the key typed in, two clicks, a name) is
    saved into the config file, applied, and counts the ball; a zone drawn on cam1's (its
    corners clicked, then the first again) sees the ball enter;
  - the camera server killed (SIGKILL): the page shows the cameras reconnecting within 2 s,
    without a reload; back on its port, streaming again;
  - the camera's password (in cam1's URL) is in neither the page nor its API, and neither it
    nor the page's key is in /health, /metrics, /api/events or the service's log.
It leaves a screenshot, web-page.png, in the build folder (docs/web-page.png is one).
Exit status 77 (meson's "skipped"), with the reason, where chromium, chromedriver or selenium is
missing.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

SOURCE = os.environ["CUDANMS_SOURCE_ROOT"]
BUILD = os.environ["CUDANMS_BUILD"]
PASSWORD = "s3cret-of-cam1"
KEY = "test-key-of-the-page"
SKIPPED = 77


def skip(reason):
    print("SKIPPED: " + reason)
    sys.exit(SKIPPED)


def browser():
    chromium = shutil.which("chromium")
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not chromium or not os.path.exists(driver):
        skip("no chromium or chromedriver (apt-get install chromium chromium-driver)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        skip("no selenium (apt-get install python3-selenium)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1400,900"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(driver), options=options)


def eventually(seconds, check, interval=0.1):
    """check() until it gives a true value, at most `seconds`; that value, or None."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def replaced(element):
    """Whether the page has taken `element` out of its document (a list rendered anew)."""
    from selenium.common.exceptions import StaleElementReferenceException
    try:
        element.is_enabled()
        return False
    except StaleElementReferenceException:
        return True


def present(check, seconds=10):
    """check()'s first value that is not None within `seconds` (0 included), or None."""
    seen = []
    eventually(seconds, lambda: seen.append(check()) or seen[-1] is not None)
    return seen[-1]


CLIP_PRE, CLIP_POST = 2, 1  # the events' clips' seconds before and after (the clips keys)
GOP_S = 1  # the camera's stream: a keyframe each 10 frames at 10 frames/s (make_clip)


def get_status(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def make_clip(path):
    raw = path + ".i420"
    steps = [
        "videotestsrc pattern=ball motion=wavy num-buffers=200 ! "
        "video/x-raw,width=160,height=120,framerate=10/1,format=I420 ! videorate ! "
        f"video/x-raw,framerate=5/1 ! filesink location={raw}",
        f"filesrc location={raw} ! rawvideoparse width=160 height=120 format=i420 "
        "framerate=10/1 ! x264enc bframes=0 key-int-max=10 tune=zerolatency "
        f"speed-preset=ultrafast ! h264parse ! mp4mux ! filesink location={path}"]
    for step in steps:
        subprocess.run(["gst-launch-1.0", "-q"] + step.split(), check=True, timeout=60)
    os.remove(raw)


def first_match(path, pattern, seconds):
    def find():
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                found = re.search(pattern, f.read())
            return found.group(1) if found else None
        except FileNotFoundError:
            return None
    return eventually(seconds, find)


def get(url):
    with urllib.request.urlopen(url, timeout=5) as answer:
        return answer.read()


def body_of(url):
    """What `url` answers, an error status's body too (/health is 503 while a camera is down)."""
    try:
        return get(url)
    except urllib.error.HTTPError as error:
        return error.read()


def main():
    driver = browser()
    work = tempfile.mkdtemp(prefix="cudanms-web-")
    processes = []

    def start(argv, name):
        out = open(os.path.join(work, name + ".log"), "w")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        processes.append(p)
        return p

    try:
        clip = os.path.join(work, "ball.mp4")
        make_clip(clip)
        server = start([os.path.join(SOURCE, "pipelines", "rtsp-server"), "--port", "0",
                        "--address", "127.0.0.1", "--loop", "--cameras", "2", "--mount", "/cam",
                        clip], "rtsp-server")
        port = first_match(os.path.join(work, "rtsp-server.log"),
                           r"rtsp://127\.0\.0\.1:(\d+)/", 30)
        assert port, "the camera server did not start: " + open(
            os.path.join(work, "rtsp-server.log")).read()
        config = os.path.join(work, "site.conf")
        with open(config, "w") as f:
            f.write(f"""[service]
metrics-address = 127.0.0.1:0
detector = brightspot
lines = middle:0.5,0,0.5,1
normalized = true
reconnect-initial = 0.5
web-auth = {KEY}
history = {os.path.join(work, "history.sqlite")}
snapshots = {os.path.join(work, "events")}
clips = true
clip-pre-capture = {CLIP_PRE}
clip-post-capture = {CLIP_POST}
[camera.cam1]
url = rtsp://operator:{PASSWORD}@127.0.0.1:{port}/cam1
[camera.cam2]
url = rtsp://127.0.0.1:{port}/cam2
""")
        start([os.path.join(SOURCE, "pipelines", "service"), "--config", config], "service")
        base = first_match(os.path.join(work, "service.log"),
                           r"metrics at (http://127\.0\.0\.1:\d+)/metrics", 30)
        assert base, "the service did not start: " + open(
            os.path.join(work, "service.log")).read()

        driver.get(base + "/")

        def states():
            return {card.get_attribute("data-camera"):
                    card.find_element("css selector", ".state").text
                    for card in driver.find_elements("css selector", "article.camera")}
        assert eventually(30, lambda: states() == {"cam1": "streaming", "cam2": "streaming"}), \
            f"the page does not show both cameras streaming: {states()}"
        print("both cameras listed, streaming")

        def picture(camera):
            return driver.execute_script(
                "const i = document.querySelector(`article[data-camera='${arguments[0]}'] "
                "img.snapshot`); return i && i.complete && i.naturalWidth > 0 ? i.src : null;",
                camera)
        def pictures_made():
            cameras = json.loads(get(base + "/api/cameras"))["cameras"]
            return {name: c["snapshot"] for name, c in cameras.items()}
        for camera in ("cam1", "cam2"):
            first = eventually(10, lambda: picture(camera))
            assert first, f"{camera}: no picture loaded"
            made = pictures_made()[camera]
            newer = eventually(10, lambda: (p := picture(camera)) and p != first and p)
            assert newer, f"{camera}: the picture never changed from {first}"
            assert eventually(5, lambda: pictures_made()[camera] > made), \
                f"{camera}: no new picture made while the page shows it"
        print("each camera's picture loads and a newer one replaces it")

        def counted(camera, line="middle"):
            cells = driver.find_elements(
                "css selector", f"article[data-camera='{camera}'] tr[data-line='{line}'] td.number")
            try:
                return sum(int(c.text) for c in cells) if cells else None
            except Exception:  # the table redrawn meanwhile
                return None
        def rose_above(before, camera, line="middle"):
            return lambda: (now := counted(camera, line)) is not None and now > before
        before = present(lambda: counted("cam1"))
        assert before is not None, "no count of cam1's line 'middle' on the page"
        started = time.monotonic()
        assert eventually(25, rose_above(before, "cam1"), 0.2), \
            f"cam1's count on 'middle' stayed at {before}"
        print(f"cam1's count on 'middle' rose from {before} to {counted('cam1')} "
              f"{time.monotonic() - started:.1f} s later")
        events = driver.find_element("css selector", "#events").text
        assert "cam1: ball" in events and "crossed middle" in events, events

        # The history: cam1's crossings searched on the page, as many as /api/events keeps.
        from selenium.webdriver.support.ui import Select
        Select(driver.find_element("css selector", "#history-camera")).select_by_value("cam1")
        Select(driver.find_element("css selector", "#history-kind")).select_by_value(
            "line-crossed")
        driver.find_element("css selector", "#history-search button").click()
        kept = json.loads(get(base + "/api/events?camera=cam1&kind=line-crossed"))["events"]
        assert kept, "no crossing of cam1 in the history"
        def listed():
            return [li.text for li in driver.find_elements("css selector", "#history li")]
        assert eventually(5, lambda: len(listed()) >= len(kept)), \
            f"the page's history lists {listed()}, /api/events {len(kept)} crossings"
        assert all("cam1: ball" in t and "crossed middle" in t for t in listed()), listed()
        print(f"the history lists cam1's crossings: {len(listed())}")
        # An event's picture: its button shows the frame (the clip's 160 px: pictures are at most
        # 640 wide, never enlarged) under the history.
        assert eventually(5, lambda: driver.find_elements(
            "css selector", "#history li button.picture")), "no event with a picture listed"
        driver.find_element("css selector", "#history li button.picture").click()
        shown = driver.find_element("css selector", "#history-picture img")
        assert eventually(5, lambda: driver.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth", shown) == 160), \
            "the event's picture did not load"
        assert "crossed middle" in driver.find_element(
            "css selector", "#history-picture figcaption").text
        print("an event's picture shows on the page")
        # An event's clip: its button plays it under the history, as long as was asked (from the
        # keyframe at or before pre-capture: a GOP more at most). The newest event whose clip is
        # muxed, so that its pre-capture was in the ring.
        def ready_clip():
            events = json.loads(get(base + "/api/events?camera=cam1&kind=line-crossed"))["events"]
            for at, e in enumerate(events):
                if e["clip"] and get_status(base + e["clip"]) == 200:
                    return at, e
            return None
        found = eventually(15, ready_clip)
        assert found, "no clip of cam1's crossings was served"
        at, event = found
        # The list anew, then its button: one found before the list is replaced is gone when
        # clicked (CI: "stale element reference").
        listed_before = driver.find_element("css selector", "#history li")
        driver.find_element("css selector", "#history-search button").click()
        assert eventually(5, lambda: replaced(listed_before)), "the history was not listed anew"
        button = f"#history li:nth-child({at + 1}) button.clip"
        assert eventually(5, lambda: driver.find_elements("css selector", button)), \
            f"no clip button on event {event['seq']}"
        driver.find_element("css selector", button).click()
        video = driver.find_element("css selector", "#history-clip video")
        assert eventually(10, lambda: driver.execute_script(
            "return arguments[0].readyState", video) >= 2), \
            "the clip did not play: " + driver.find_element(
                "css selector", "#history-clip figcaption").text
        duration = driver.execute_script("return arguments[0].duration", video)
        asked = CLIP_PRE + CLIP_POST
        assert asked - 0.3 <= duration <= asked + GOP_S + 0.3, \
            f"the clip lasts {duration:.2f} s where {asked} s (and a GOP at most) were asked"
        print(f"an event's clip plays on the page: {duration:.2f} s, {asked} s asked")
        # Its chart: a bar an hour on 'middle', as many crossings as /api/events/hourly counts.
        hours = json.loads(get(base + "/api/events/hourly?camera=cam1"))["hours"]
        counted_hourly = sum(h["in"] + h["out"] for h in hours if h["line"] == "middle")
        assert counted_hourly >= len(kept), (hours, kept)
        def charted():
            return sum(int(r.get_attribute("data-count")) for r in driver.find_elements(
                "css selector", "#history-chart rect[data-line='middle']"))
        assert eventually(5, lambda: charted() >= len(kept)), \
            f"the chart shows {charted()} crossings, the history {counted_hourly}"
        print(f"the hourly chart shows {charted()} crossings on 'middle' "
              f"in {len({h['hour'] for h in hours})} hour(s)")
        driver.save_screenshot(os.path.join(BUILD, "web-page.png"))

        def post(camera, body, key):
            request = urllib.request.Request(
                f"{base}/api/cameras/{camera}/shapes", data=json.dumps(body).encode(),
                method="POST", headers={"Authorization": "Bearer " + key,
                                        "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=5) as answer:
                    return answer.status, json.loads(answer.read())
            except urllib.error.HTTPError as refused:
                return refused.code, json.loads(refused.read())
        saved_before = open(config).read()
        for camera, body, key, status in (
                ("cam2", {"lines": "door:0.3,0,0.3,1"}, "a-wrong-key", 401),
                ("cam2", {"lines": "door:0.3,0,1.5,1"}, KEY, 400),
                ("cam2", {"lines": "door:0.3,0.5,0.3,0.5"}, KEY, 400),
                ("cam2", {"lines": "a door:0,0,1,1"}, KEY, 400),
                ("cam2", {"line": "door:0.3,0,0.3,1"}, KEY, 400),
                ("cam2", {"zones": "bow:0.1,0.1 0.9,0.9 0.9,0.1 0.1,0.9"}, KEY, 400),
                ("cam2", {"zones": "off:0.1,0.1 1.5,0.1 0.5,0.9"}, KEY, 400),
                ("cam9", {"lines": "door:0.3,0,0.3,1"}, KEY, 404)):
            got, said = post(camera, body, key)
            assert got == status and said.get("error"), (camera, body, got, said)
            print(f"refused, {got}: {said['error']}")
        assert open(config).read() == saved_before, "a refused change was saved"

        card2 = "article[data-camera='cam2']"
        driver.find_element("css selector", "#key").send_keys(KEY)
        driver.find_element("css selector", card2 + " button.draw").click()

        def click_at(card, fx, fy):
            """A click at (fx, fy) of the picture, fitted into its box with bars around it."""
            from selenium.webdriver.common.action_chains import ActionChains
            image = driver.find_element("css selector", card + " img.snapshot")
            w, h, nw, nh = driver.execute_script(
                "const r = arguments[0].getBoundingClientRect(); "
                "return [r.width, r.height, arguments[0].naturalWidth, "
                "arguments[0].naturalHeight];", image)
            scale = min(w / nw, h / nh)
            dx = (w - nw * scale) / 2 + fx * nw * scale - w / 2
            dy = (h - nh * scale) / 2 + fy * nh * scale - h / 2
            ActionChains(driver).move_to_element_with_offset(image, round(dx), round(dy)) \
                .click().perform()

        def alert():
            try:
                return driver.switch_to.alert
            except Exception:
                return None
        def name_it(card, name):
            said = lambda: driver.find_element("css selector", card + " .answer").text
            prompt = eventually(5, alert)
            assert prompt, (f"no prompt for the name of {name}: the card says {said()!r}, its "
                            "picture is " + driver.execute_script(
                                "const i = document.querySelector(arguments[0]); return "
                                "i.naturalWidth + 'x' + i.naturalHeight + ' ' + i.src;",
                                card + " img.snapshot"))
            prompt.send_keys(name)
            prompt.accept()
            answer = eventually(10, lambda: said().startswith("saved") and said())
            assert answer, said()
            return answer
        click_at(card2, 0.3, 0.05)
        click_at(card2, 0.3, 0.95)
        print("drawn on cam2's picture:", name_it(card2, "door"))
        # Where the clicks fell, to a pixel of the picture (160 x 120) in the page.
        assert re.search(r"lines=middle:0\.5,0,0\.5,1;door:0\.[23]\d*,0\.0\d*,0\.[23]\d*,0\.9\d*",
                         open(config).read()), open(config).read()
        started = time.monotonic()
        assert eventually(40, rose_above(0, "cam2", "door"), 0.2), \
            "the drawn line 'door' never counted on cam2"
        print(f"cam2's new line 'door' counted {counted('cam2', 'door')} "
              f"{time.monotonic() - started:.1f} s after it was saved")

        # A zone on cam1: the left half of its picture, four corners and the first again.
        card1 = "article[data-camera='cam1']"
        driver.find_element("css selector", card1 + " button.draw-zone").click()
        for x, y in ((0.02, 0.02), (0.48, 0.02), (0.48, 0.98), (0.02, 0.98), (0.025, 0.025)):
            click_at(card1, x, y)
        print("drawn on cam1's picture:", name_it(card1, "west"))
        assert re.search(r"zones=west:0\.0\d*,0\.0\d* 0\.4\d*,0\.0\d* 0\.4\d*,0\.9\d* "
                         r"0\.0\d*,0\.9\d*\n", open(config).read()), open(config).read()
        started = time.monotonic()
        assert eventually(40, lambda: "entered west" in driver.find_element(
            "css selector", "#events").text, 0.2), "the drawn zone 'west' never saw the ball"
        print(f"cam1's new zone 'west' saw the ball enter {time.monotonic() - started:.1f} s "
              "after it was saved")

        os.killpg(server.pid, signal.SIGKILL)
        killed = time.monotonic()
        shown = eventually(5, lambda: states() == {"cam1": "reconnecting", "cam2": "reconnecting"})
        seconds = time.monotonic() - killed
        assert shown, f"after the camera server died the page shows {states()}"
        print(f"camera server killed: the page shows both cameras reconnecting {seconds:.1f} s "
              "later")
        assert seconds <= 2, f"{seconds:.1f} s before the page showed the cameras reconnecting"

        # Back on its port: the page shows them streaming again, still without a reload.
        server = start([os.path.join(SOURCE, "pipelines", "rtsp-server"), "--port", port,
                        "--address", "127.0.0.1", "--loop", "--cameras", "2", "--mount", "/cam",
                        clip], "rtsp-server-again")
        restarted = time.monotonic()
        assert eventually(20, lambda: states() == {"cam1": "streaming", "cam2": "streaming"}), \
            f"after the camera server came back the page shows {states()}"
        print(f"camera server back: the page shows both cameras streaming "
              f"{time.monotonic() - restarted:.1f} s later")
        os.killpg(server.pid, signal.SIGKILL)
        assert eventually(5, lambda: states() == {"cam1": "reconnecting", "cam2": "reconnecting"})

        api = get(base + "/api/cameras").decode()
        errors = {name: c["last_error"] for name, c in json.loads(api)["cameras"].items()}
        assert all(errors.values()), f"no error said for the reconnecting cameras: {errors}"
        for where, text in (("the API", api), ("the page", driver.page_source)):
            assert PASSWORD not in text, f"cam1's password is in {where}"
        # No secret anywhere the service says things: cam1's password, the page's key.
        said = {"/health": body_of(base + "/health").decode(),
                "/metrics": body_of(base + "/metrics").decode(),
                "/api/events": body_of(base + "/api/events").decode(),
                "the log": open(os.path.join(work, "service.log")).read()}
        for where, text in said.items():
            for secret in (PASSWORD, KEY):
                assert secret not in text, f"a secret ({secret[:4]}...) is in {where}"
        print("cam1's password is in neither the page nor its API; errors:", errors)
        print("no secret in /health, /metrics, /api/events or the log")
    finally:
        driver.quit()
        for p in processes:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
        if os.environ.get("CUDANMS_KEEP_WORK"):
            print("work folder:", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
