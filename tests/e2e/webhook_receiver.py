"""A webhook receiver for tests/e2e/webhooks.rs: checks every delivery with
the official Standard Webhooks library (PyPI `standardwebhooks`), answers
500 to the first N deliveries (to make the gateway retry) and 200 after,
and prints one JSON line per delivery: its id, whether it verified, the
status it answered and the payload.

Usage: python webhook_receiver.py SECRET N
First line printed: {"port": P}.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook

SECRET, FAIL_FIRST = sys.argv[1], int(sys.argv[2])
VERIFIER = Webhook(SECRET)
LOCK = threading.Lock()
SEEN = [0]


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            payload = VERIFIER.verify(body, headers)
            verified, error = True, None
        except Exception as err:  # any refusal is what the test reports
            payload, verified, error = None, False, repr(err)
        with LOCK:
            SEEN[0] += 1
            status = 500 if SEEN[0] <= FAIL_FIRST else 200
            line = {
                "id": headers.get("webhook-id"),
                "verified": verified,
                "error": error,
                "status": status,
                "payload": payload,
            }
            print(json.dumps(line), flush=True)
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
print(json.dumps({"port": server.server_address[1]}), flush=True)
server.serve_forever()
