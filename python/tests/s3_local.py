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
    a fraction `errors` of them with 503 and resets a fraction `resets` of connections. `seen`
    lists each request as `(method, path)`, in order (how often a request was retried)."""

    def __init__(self, upstream, latency=0.02, errors=0.01, resets=0.005, seed=0, forced=None):
        host, port = upstream.rsplit("//", 1)[1].split(":")
        rng = random.Random(seed)
        lock = threading.Lock()
        self.counts = {"requests": 0, "errors": 0, "resets": 0}
        counts = self.counts
        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                time.sleep(latency)
                with lock:
                    counts["requests"] += 1
                    seen.append((self.command, self.path))
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


class StaticS3:
    """A read-only S3-compatible server of a local folder, for benchmarks: bucket ``NAME`` is the
    folder, each file an object. It answers HEAD and GET (whole, or one ``Range``) with the
    file's bytes sent by ``os.sendfile`` from a thread per connection, after sleeping ``latency``
    seconds: the 20 ms of a remote store without moto's per-request cost (moto keeps objects in
    Python and slows down with their size), so a benchmark measures the client. No listing,
    writes or signature checks."""

    def __init__(self, root, bucket="bench", latency=0.02):
        import email.utils
        import hashlib

        root = os.path.abspath(root)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        counts = self.counts = {"requests": 0, "bytes": 0}
        lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _object(self):
                path = self.path.split("?", 1)[0]
                prefix = f"/{bucket}/"
                if not path.startswith(prefix):
                    return None
                file = os.path.normpath(os.path.join(root, path[len(prefix):]))
                return file if file.startswith(root + os.sep) and os.path.isfile(file) else None

            def _head(self, file, send_body):
                time.sleep(latency)
                st = os.stat(file)
                start, end = 0, st.st_size - 1
                rng = self.headers.get("Range")
                status = 200
                if rng and rng.startswith("bytes="):
                    a, _, b = rng[6:].partition("-")
                    start, end = int(a), min(int(b) if b else st.st_size - 1, st.st_size - 1)
                    status = 206
                etag = '"' + hashlib.md5(f"{file}{st.st_mtime_ns}{st.st_size}".encode()).hexdigest() + '"'
                self.send_response(status)
                self.send_header("Content-Length", str(end - start + 1))
                self.send_header("ETag", etag)
                self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))
                self.send_header("Accept-Ranges", "bytes")
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{st.st_size}")
                self.end_headers()
                with lock:
                    counts["requests"] += 1
                    counts["bytes"] += (end - start + 1) if send_body else 0
                if send_body:
                    self.wfile.flush()
                    with open(file, "rb") as f:
                        offset, left = start, end - start + 1
                        while left > 0:
                            sent = os.sendfile(self.connection.fileno(), f.fileno(), offset, left)
                            if sent == 0:
                                break
                            offset, left = offset + sent, left - sent

            def _answer(self, send_body):
                file = self._object()
                if file is None:
                    self.send_error(404)
                    return
                self._head(file, send_body=send_body)

            def do_HEAD(self):
                self._answer(send_body=False)

            def do_GET(self):
                self._answer(send_body=True)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
