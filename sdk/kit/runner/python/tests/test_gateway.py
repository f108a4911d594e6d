"""gateway.py's request handling (Conn), in-process over a socket pair: the token, the bounds on what one
request may carry, and the routes. Imported, the gateway serves nothing: gateway_start.py calls its run()."""
import ast
import inspect
import json
import os
import shutil
import socket
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gateway  # noqa: E402


class FakeChan:
    def __init__(self):
        self.got = bytearray()
        self.ended = False

    def write(self, data):
        self.got.extend(data)

    def end(self):
        self.ended = True


class Conn(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="agentws-gateway-test-")
        gateway.TOKEN, gateway.HOME, gateway.ROOT = b"s3cret", self.home, "/workspace"
        gateway.chans.clear()
        self.client = None
        self.fresh()

    def fresh(self):
        """A new connection (a refused request closes its own)."""
        if self.client is not None:
            self.client.close()
            self.conn.f.close()
            self.conn.sock.close()
        self.client, server = socket.socketpair()
        self.client.settimeout(10)
        server.settimeout(10)
        self.conn = gateway.Conn(server)

    def tearDown(self):
        gateway.chans.clear()
        self.client.close()
        self.conn.f.close()
        self.conn.sock.close()
        shutil.rmtree(self.home, ignore_errors=True)

    def ask(self, raw):
        """Sends raw request bytes, serves one request; (status, headers, body, what one() returned)."""
        self.client.sendall(raw)
        try:
            more = self.conn.one()
        except gateway.Bad:
            more = "bad"
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.client.recv(65536)
            if not chunk:
                return None, {}, b"", more
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
        n = int(headers.get("content-length", "0"))
        while len(body) < n:
            body += self.client.recv(65536)
        return int(lines[0].split()[1]), headers, body, more

    def request(self, method, path, body=b"", token=b"s3cret", extra=b""):
        head = b"%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n" % (method, path, len(body))
        if token is not None:
            head += b"X-Agentws-Token: " + token + b"\r\n"
        return self.ask(head + extra + b"\r\n" + body)

    def test_ping_with_the_token(self):
        status, _, body, more = self.request(b"GET", b"/ping")
        self.assertEqual((status, json.loads(body), more), (200, {"ok": True}, True))

    def test_a_proxy_prefix_is_kept(self):
        self.assertEqual(self.request(b"GET", b"/proxy/abc/ping")[0], 200)

    def test_wrong_or_missing_token(self):
        for token in (b"s3cre", b"s3cret2", b"", None):
            self.fresh()
            status, headers, body, more = self.request(b"GET", b"/ping", token=token)
            self.assertEqual((status, more), (403, False), token)
            self.assertEqual(headers.get("connection"), "close")
            self.assertEqual(json.loads(body), {"error": "bad token"})

    def test_chunked_bodies_are_refused(self):
        status, _, _, more = self.request(b"POST", b"/open", extra=b"Transfer-Encoding: chunked\r\n")
        self.assertEqual((status, more), (411, False))

    def test_too_many_header_lines(self):
        extra = b"".join(b"X-H%d: v\r\n" % i for i in range(gateway.MAX_HEADERS + 1))
        self.assertEqual(self.request(b"GET", b"/ping", extra=extra)[0], 431)

    def test_malformed_request_lines_drop_the_connection(self):
        for raw in (b"GET /ping\r\n\r\n", b"GET / HTTP/1.1 extra\r\n\r\n"):
            self.fresh()
            self.client.sendall(raw)
            with self.assertRaises(gateway.Bad):
                self.conn.one()

    def test_header_line_without_an_end_drops_the_connection(self):
        self.client.sendall(b"GET /ping HTTP/1.1\r\nX-Long: " + b"a" * 9000 + b"\r\n\r\n")
        with self.assertRaises(gateway.Bad):
            self.conn.one()

    def test_open_checks_the_runner_version(self):
        for want in ("", "xyz", "0123456789abcdeF", "0123456789abcdef0", 7):
            self.fresh()
            status, _, body, _ = self.request(b"POST", b"/open", json.dumps({"runner": want}).encode())
            self.assertEqual(status, 400, want)
        self.fresh()
        status, _, body, _ = self.request(b"POST", b"/open", json.dumps({"runner": "0123456789abcdef"}).encode())
        self.assertEqual(status, 409)
        self.assertIn(b"not installed", body)

    def test_open_body_is_bounded(self):
        self.assertEqual(self.request(b"POST", b"/open", b"{" + b" " * 5000 + b"}")[0], 413)

    def test_input_goes_to_its_channel_within_the_bound(self):
        c = FakeChan()
        gateway.chans["k1"] = c
        status, _, _, more = self.request(b"POST", b"/c/k1/in", b"\0frame bytes\xff")
        self.assertEqual((status, more), (204, True))
        self.assertEqual(bytes(c.got), b"\0frame bytes\xff")

    def test_input_over_the_bound_is_refused_unread(self):
        c = FakeChan()
        gateway.chans["k1"] = c
        head = b"POST /c/k1/in HTTP/1.1\r\nX-Agentws-Token: s3cret\r\nContent-Length: %d\r\n\r\n" % (gateway.MAX_IN + 1)
        status, _, _, more = self.ask(head)
        self.assertEqual((status, more), (413, False))
        self.assertEqual(bytes(c.got), b"")

    def test_unknown_channel_and_route(self):
        self.assertEqual(self.request(b"POST", b"/c/nope/in", b"x")[0], 404)
        self.fresh()
        self.assertEqual(self.request(b"GET", b"/etc/passwd")[0], 404)

    def test_close_ends_the_channel(self):
        c = FakeChan()
        gateway.chans["k1"] = c
        self.assertEqual(self.request(b"POST", b"/c/k1/close")[0], 204)
        self.assertTrue(c.ended)


class Composition(unittest.TestCase):
    """The start (gateway_start.py) runs the body (gateway.py) by name: its call must fit the body's run()."""

    def test_the_start_calls_run_with_what_it_takes(self):
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        with open(os.path.join(here, "gateway_start.py")) as f:
            tree = ast.parse(f.read())
        mains = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
        self.assertEqual(len(mains), 1)
        # The boot line (http-channel.ts) calls main(A): one argument, the parts of stdin.
        self.assertEqual([a.arg for a in mains[0].args.args], ["parts"])
        calls = [
            n for n in ast.walk(mains[0])
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) and isinstance(n.func.value, ast.Name) and n.func.value.id == "gateway"
        ]
        self.assertEqual(len(calls), 1)
        key = calls[0].func.slice
        if type(key).__name__ == "Index":  # before Python 3.9
            key = key.value
        self.assertEqual(ast.literal_eval(key), "run")
        params = list(inspect.signature(gateway.run).parameters)
        self.assertEqual([a.id for a in calls[0].args], ["srv"] + params[1:])
        self.assertEqual(calls[0].keywords, [])


if __name__ == "__main__":
    unittest.main()
