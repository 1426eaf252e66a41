#!/usr/bin/python3
"""A screenshot of the operator's page (docs/service.md) in headless chromium, once every camera
that streams shows its picture: for docs/, or for a bug report.

    tools/page-screenshot.py http://127.0.0.1:9358/ out/page.png [--size 1400x900] [--wait 30]

Needs Debian's chromium, chromium-driver and python3-selenium (run.sh installs them)."""
import argparse
import sys
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("url")
    parser.add_argument("png")
    parser.add_argument("--size", default="1400x900", help="the window, WIDTHxHEIGHT")
    parser.add_argument("--wait", type=float, default=30,
                        help="seconds at most for every streaming camera's picture")
    args = parser.parse_args()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        sys.exit("no selenium: apt-get install python3-selenium chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=" + args.size.replace("x", ",")):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get(args.url)
        # Every card whose camera streams has a loaded picture (cards of cameras on no host, or
        # stopped, have none to wait for).
        ready = ("const cards = [...document.querySelectorAll('article.camera')];"
                 "return cards.length > 0 && cards.every((c) => "
                 "c.querySelector('.state').textContent !== 'streaming' || "
                 "c.querySelector('img.snapshot').naturalWidth > 0);")
        deadline = time.monotonic() + args.wait
        while not driver.execute_script(ready) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)  # the next second's counts and events
        driver.save_screenshot(args.png)
        print(args.png)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
