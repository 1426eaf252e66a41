#!/usr/bin/env python3
"""Runs every command of README.md's sh blocks as it is written there, so that none can drift.

The commands run in order, each with bash, in a scratch folder that holds the source tree's
files (links) and the build under test as ./build, so that out/ is the test's own. What is
changed, and only this: the fixed ports of the README (8554, 8555, 9358, 9360, 1883, 2379,
2380), in the commands and in pipelines/*.conf, become free ones, so that the test never meets
another server.
A command that ends in & runs in the background until the end, when it gets SIGTERM and must
end by itself (the service with 0). curl is retried for 20 s: the service it asks starts in the
background. Every out/ path a command names must exist afterwards, not empty.

Skipped, and said so: `./run.sh test` (what CI runs: .ci/run calls it, checked here) and `meson
test` (./run.sh test runs it; from inside meson test it would rewrite the running test log);
commands that need hardware this machine lacks: a V4L2 device, NVDEC (nvh264dec).
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SOURCE = os.environ["CUDANMS_SOURCE_ROOT"]
BUILD = os.environ["CUDANMS_BUILD"]
README_PORTS = ("8554", "8555", "9358", "9360", "1883", "2379", "2380")


def readme_commands():
    text = open(os.path.join(SOURCE, "README.md"), encoding="utf-8").read()
    commands = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M):
        command = ""
        for line in block.splitlines():
            command += line
            if line.endswith("\\"):
                command += "\n"
                continue
            if command.strip():
                commands.append(command)
            command = ""
    return commands


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def listening(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", int(port))) == 0


def element_exists(name):
    return subprocess.run(["gst-inspect-1.0", name], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def skip_reason(command):
    if command.startswith("./run.sh test"):
        ci = open(os.path.join(SOURCE, ".ci/run"), encoding="utf-8").read()
        assert "./run.sh test" in ci, ".ci/run no longer runs ./run.sh test"
        return "what CI runs (.ci/run)"
    if command.startswith("meson test"):
        # Run from inside meson test, it would rewrite the log the outer one is writing.
        run_sh = open(os.path.join(SOURCE, "run.sh"), encoding="utf-8").read()
        assert "meson test -C build" in run_sh, "./run.sh test no longer runs meson test"
        return "what ./run.sh test runs; not from inside meson test"
    if "/dev/video" in command and not os.path.exists(re.search(r"/dev/video\d+", command)[0]):
        return "no V4L2 device here"
    if "nvh264dec" in command and not element_exists("nvh264dec"):
        return "no NVDEC (nvh264dec) here"
    return None


def scratch_tree(ports):
    """The source tree's top-level entries as links, ./build the build under test, and
    pipelines/ with its configs on the free ports."""
    root = tempfile.mkdtemp(prefix="cudanms-readme-")
    for entry in os.listdir(SOURCE):
        if entry in ("build", "out", "pipelines", ".git"):
            continue
        os.symlink(os.path.join(SOURCE, entry), os.path.join(root, entry))
    os.symlink(BUILD, os.path.join(root, "build"))
    os.mkdir(os.path.join(root, "pipelines"))
    for entry in os.listdir(os.path.join(SOURCE, "pipelines")):
        source = os.path.join(SOURCE, "pipelines", entry)
        if entry.endswith(".conf"):
            with open(source, encoding="utf-8") as f:
                open(os.path.join(root, "pipelines", entry), "w").write(with_ports(f.read(), ports))
        else:
            os.symlink(source, os.path.join(root, "pipelines", entry))
    return root


def with_ports(text, ports):
    for readme_port, port in ports.items():
        text = re.sub(r"(?<=[:= ])%s\b" % readme_port, port, text)
    return text


def check_outputs(command, root):
    for path in re.findall(r"(?<![\w/.])out/[\w./{}-]+", command):
        full = os.path.join(root, path)
        ok = os.path.isdir(full) and os.listdir(full) or os.path.isfile(full) and os.path.getsize(full)
        assert ok, "%s: it did not write %s" % (command.splitlines()[0], path)


def main():
    ports = {p: free_port() for p in README_PORTS}
    root = scratch_tree(ports)
    env = dict(os.environ, CUDANMS_BUILD=os.path.join(root, "build"))
    background = []
    ran = skipped = 0
    try:
        for readme_command in readme_commands():
            command = with_ports(readme_command, ports)
            first_line = readme_command.splitlines()[0]
            reason = skip_reason(command)
            if reason:
                print("SKIP %s  (%s)" % (first_line, reason), flush=True)
                skipped += 1
                continue
            print("RUN  %s" % first_line, flush=True)
            started = time.monotonic()
            if command.rstrip().endswith("&"):
                job = subprocess.Popen(["bash", "-c", "exec " + command.rstrip()[:-1]], cwd=root,
                                       env=env, stdout=subprocess.DEVNULL, start_new_session=True)
                background.append((first_line, job))
                for port in re.findall(
                        r"(?:--?p(?:ort)? |--listen-client-urls http://127\.0\.0\.1:)(\d+)", command):
                    deadline = time.monotonic() + 20
                    while not listening(port) and time.monotonic() < deadline:
                        assert job.poll() is None, "%s ended at once (%d)" % (first_line, job.returncode)
                        time.sleep(0.1)
                    assert listening(port), "%s: nothing listens on %s" % (first_line, port)
            else:
                # Commands that set the environment (export) hold for the ones after them.
                script = command + '\nenv -0 > "$CUDANMS_README_ENV"'
                env_file = os.path.join(root, ".env")
                deadline = time.monotonic() + (20 if command.startswith("curl") else 0)
                while True:
                    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=root,
                                          env=dict(env, CUDANMS_README_ENV=env_file),
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True, timeout=600)
                    if done.returncode == 0 or time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
                tail = "\n".join(done.stdout.splitlines()[-15:])
                assert done.returncode == 0, "%s: exit %d\n%s" % (first_line, done.returncode, tail)
                env = dict(e.split("=", 1) for e in open(env_file).read().split("\0") if "=" in e)
                env.pop("CUDANMS_README_ENV", None)
                check_outputs(command, root)
            ran += 1
            print("     ok in %.1f s" % (time.monotonic() - started), flush=True)
    finally:
        for first_line, job in reversed(background):
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGTERM)
            try:
                rc = job.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
                raise AssertionError("%s did not end within 15 s of SIGTERM" % first_line)
            if "pipelines/service" in first_line:
                assert rc == 0, "the service ended with %d after SIGTERM" % rc
        shutil.rmtree(root, ignore_errors=True)
    print("README: %d commands ran, %d skipped" % (ran, skipped))


if __name__ == "__main__":
    sys.exit(main())
