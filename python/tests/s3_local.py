"""A local S3-compatible server (moto, in its own process on a loopback port) and a
fault-injecting HTTP proxy for it: what the remote-storage tests (test_remote.py) and
benchmark (benches/remote_loader.py) run against. Nothing leaves 127.0.0.1."""

import http.client
import http.server
import os
import random
import socket
import subprocess
import sys
import threading
import time

import boto3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Moto:
    """A moto S3 server in its own process on a loopback port."""

    def __init__(self, extra_env=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, **(extra_env or {}))
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError("moto server exited at start")
                time.sleep(0.1)
        raise RuntimeError("moto server did not start in 30 s")

    def client(self, key="testing"):
        return boto3.client("s3", endpoint_url=self.url, region_name="us-east-1",
                            aws_access_key_id=key, aws_secret_access_key="testing")

    def stop(self):
        self.proc.kill()
        self.proc.wait()


class FaultProxy:
    """An HTTP proxy on loopback in front of `upstream`: adds `latency` to every request, answers
    a fraction `errors` of them with 503 and resets a fraction `resets` of connections."""

    def __init__(self, upstream, latency=0.02, errors=0.01, resets=0.005, seed=0, forced=None):
        host, port = upstream.rsplit("//", 1)[1].split(":")
        rng = random.Random(seed)
        lock = threading.Lock()
        self.counts = {"requests": 0, "errors": 0, "resets": 0}
        counts = self.counts

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                time.sleep(latency)
                with lock:
                    counts["requests"] += 1
                    roll = rng.random()
                    # Faults at fixed requests too, so that a short epoch meets each kind.
                    roll = {"reset": 0.0, "error": resets}.get((forced or {}).get(counts["requests"]), roll)
                if roll < resets:
                    with lock:
                        counts["resets"] += 1
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if roll < resets + errors:
                    with lock:
                        counts["errors"] += 1
                    msg = b"<Error><Code>SlowDown</Code></Error>"
                    self.send_response(503)
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    return
                conn = http.client.HTTPConnection(host, int(port), timeout=30)
                conn.request(self.command, self.path, body=body or None, headers=dict(self.headers))
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    # HEAD keeps the object's length; a body gets its own.
                    if k.lower() not in ("transfer-encoding", "connection") and (
                            k.lower() != "content-length" or self.command == "HEAD"):
                        self.send_header(k, v)
                if self.command != "HEAD":
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
