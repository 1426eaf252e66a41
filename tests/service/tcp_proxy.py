#!/usr/bin/env python3
"""A TCP forwarder for the fleet tests' network partitions: listens on 127.0.0.1:PORT (prints
"listening" once it does) and forwards each connection to 127.0.0.1:TARGET. Stopped (SIGSTOP)
it is a partition as a cut cable makes one: nothing goes through and nothing is refused, the
bytes sent meanwhile wait in the kernel's buffers; let go on (SIGCONT), it forwards them late.

With --cut-file FILE it stands in front of one etcd member's peer port and cuts it off from the
members FILE names (one etcd member id a line, in hex, as etcd's peers send it in their
requests' X-Server-From header; "*": every member), both ways, while the others' traffic goes
through: a member hears another only on connections that other one opened to it, so the proxies
of both members of a pair, each refusing the other, cut the pair. Connections of a member cut
off are closed, their new ones closed at once. FILE is read every 50 ms; absent or empty: no
cut. A connection whose first request names no sender (etcd forwarding a lease's renewal to its
leader, version checks) goes through.
    tcp_proxy.py PORT TARGET [--cut-file FILE]"""
import argparse
import socket
import threading
import time

HEADER = b"x-server-from:"


def pump(source, sink):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    close(source, sink)


def close(*sockets):
    for s in sockets:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


def sender_of(client):
    """Reads the connection's first request head: (the bytes read, the sender's id or "")."""
    head = b""
    client.settimeout(5)
    try:
        while b"\r\n\r\n" not in head and len(head) < 65536:
            data = client.recv(65536)
            if not data:
                break
            head += data
    except OSError:
        pass
    client.settimeout(None)
    for line in head.split(b"\r\n\r\n")[0].split(b"\r\n"):
        if line.lower().startswith(HEADER):
            return head, line[len(HEADER):].strip().decode(errors="replace").lower()
    return head, ""


class Cut:
    """The members cut off, from FILE, and the open connections by sender."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.refused = set()
        self.connections = []  # (sender, client, upstream)
        threading.Thread(target=self.watch, daemon=True).start()

    def refuses(self, sender):
        return "*" in self.refused or (sender and sender in self.refused)

    def watch(self):
        while True:
            try:
                with open(self.path) as f:
                    refused = {line.strip().lower() for line in f if line.strip()}
            except OSError:
                refused = set()
            with self.lock:
                self.refused = refused
                kept = []
                for sender, client, upstream in self.connections:
                    if self.refuses(sender):
                        close(client, upstream)
                    elif client.fileno() != -1:
                        kept.append((sender, client, upstream))
                self.connections = kept
            time.sleep(0.05)

    def admit(self, sender, client, upstream):
        with self.lock:
            if self.refuses(sender):
                return False
            self.connections.append((sender, client, upstream))
            return True


def serve(client, target, cut):
    head, sender = sender_of(client) if cut else (b"", "")
    if cut and cut.refuses(sender):
        close(client)
        return
    try:
        upstream = socket.create_connection(("127.0.0.1", target), timeout=5)
        upstream.settimeout(None)
        if head:
            upstream.sendall(head)
    except OSError:
        client.close()
        return
    if cut and not cut.admit(sender, client, upstream):
        close(client, upstream)
        return
    for a, b in ((client, upstream), (upstream, client)):
        threading.Thread(target=pump, args=(a, b), daemon=True).start()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("port", type=int)
    parser.add_argument("target", type=int)
    parser.add_argument("--cut-file")
    args = parser.parse_args()
    cut = Cut(args.cut_file) if args.cut_file else None
    listener = socket.create_server(("127.0.0.1", args.port))
    print("listening", flush=True)
    while True:
        client, _ = listener.accept()
        # The request head is read on a thread of its own: a slow sender holds no one else.
        threading.Thread(target=serve, args=(client, args.target, cut), daemon=True).start()


if __name__ == "__main__":
    main()
