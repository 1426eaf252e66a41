#!/usr/bin/env python3
"""A TCP forwarder for the fleet tests' network partitions: listens on 127.0.0.1:PORT (prints
"listening" once it does) and forwards each connection to 127.0.0.1:TARGET. Stopped (SIGSTOP)
it is a partition as a cut cable makes one: nothing goes through and nothing is refused, the
bytes sent meanwhile wait in the kernel's buffers; let go on (SIGCONT), it forwards them late.
    tcp_proxy.py PORT TARGET"""
import socket
import sys
import threading


def pump(source, sink):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    for s in (source, sink):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def main():
    listener = socket.create_server(("127.0.0.1", int(sys.argv[1])))
    print("listening", flush=True)
    while True:
        client, _ = listener.accept()
        try:
            upstream = socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=5)
            upstream.settimeout(None)
        except OSError:
            client.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=pump, args=(a, b), daemon=True).start()


if __name__ == "__main__":
    main()
