"""A real HTTP file server on 127.0.0.1 in a background thread, for download tests (no mocks of urllib)."""

import contextlib
import functools
import http.server
import threading


class _Handler(http.server.SimpleHTTPRequestHandler):
    # Set per server: a list collecting request paths and {path: (declared_length, body)} overrides.
    requests = None
    lies = None

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.requests.append(self.path)
        self.requests.authorization[self.path] = self.headers.get("Authorization")
        if self.path in self.lies:
            declared, body = self.lies[self.path]
            self.send_response(200)
            self.send_header("Content-Length", str(declared))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()


class RequestLog(list):
    """The request paths, in order; `authorization` maps each path to its Authorization header (or None)."""

    def __init__(self):
        super().__init__()
        self.authorization = {}


@contextlib.contextmanager
def serve_directory(directory, lies=None):
    """Serves `directory` at `http://127.0.0.1:<port>/`; yields `(base_url, requests)`.

    `lies` maps a URL path to `(declared Content-Length, body)` for responses
    that announce more bytes than they send (a connection that breaks off).
    """
    requests = RequestLog()
    handler = type("Handler", (_Handler,), {"requests": requests, "lies": dict(lies or {})})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
