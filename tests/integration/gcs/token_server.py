#!/usr/bin/python3
"""A fake Google OAuth2 token endpoint for shardfs' credential tests.

Listens on 127.0.0.1 (a free port, written to --port-file once it listens)
and answers POST /token as https://oauth2.googleapis.com/token does:

  grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=JWT
      The JWT is verified as Google verifies it: the RS256 signature with
      the public half of the service account's key (--public-key, PEM),
      header alg RS256 / typ JWT / kid (--kid), and the claims: iss =
      --email, scope = devstorage.read_only, aud = this endpoint's URL
      (http://127.0.0.1:PORT/token), iat not in the future, exp > now and
      exp - iat <= 3600.
  grant_type=refresh_token&client_id&client_secret&refresh_token
      Checked against --client-id, --client-secret, --refresh-token.

A good grant gets {"access_token": "ya29.fake-KIND-N-RANDOM",
"expires_in": --expires-in, "token_type": "Bearer"}; a bad one HTTP 400
{"error": "invalid_grant", "error_description": why}. Every request adds one
JSON line to --log: {"n", "grant", "ok", "why", "token", "assertion",
"content_type"}, flushed before the answer goes out, so a test can count the
grants and grep other logs for the secrets that passed here. While the file
--fail-file exists every request gets HTTP 503 (an outage), logged with
"why": "outage". While --hang-file exists a request is logged ("why":
"hang") and then left unanswered for 60 s (a stalled endpoint).

Debian's python3-jwt and python3-cryptography; no network beyond 127.0.0.1.
"""
import argparse
import json
import os
import secrets
import threading
import time
import http.server
import urllib.parse

import jwt

SCOPE = "https://www.googleapis.com/auth/devstorage.read_only"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--public-key", help="PEM public key of the account")
    ap.add_argument("--email")
    ap.add_argument("--kid")
    ap.add_argument("--client-id")
    ap.add_argument("--client-secret")
    ap.add_argument("--refresh-token")
    ap.add_argument("--expires-in", type=int, default=3600)
    ap.add_argument("--fail-file")
    ap.add_argument("--hang-file")
    args = ap.parse_args()
    pub = open(args.public_key).read() if args.public_key else None
    lock = threading.Lock()
    log = open(args.log, "a", buffering=1)
    count = [0]

    def check_jwt(assertion, aud):
        if pub is None:
            return "no service account configured"
        head = jwt.get_unverified_header(assertion)
        if head.get("alg") != "RS256" or head.get("typ") != "JWT":
            return "header %r" % head
        if args.kid is not None and head.get("kid") != args.kid:
            return "kid %r" % head.get("kid")
        try:
            claims = jwt.decode(assertion, pub, algorithms=["RS256"],
                                audience=aud,
                                options={"require": ["iss", "aud", "iat",
                                                     "exp"]})
        except jwt.InvalidTokenError as e:
            return "JWT rejected: %s" % e
        now = time.time()
        if claims.get("iss") != args.email:
            return "iss %r" % claims.get("iss")
        if claims.get("scope") != SCOPE:
            return "scope %r" % claims.get("scope")
        if not isinstance(claims["iat"], int) or claims["iat"] > now + 5:
            return "iat in the future"
        if claims["exp"] - claims["iat"] > 3600:
            return "exp - iat = %d > 3600" % (claims["exp"] - claims["iat"])
        return None

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def answer(self, status, obj):
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n).decode("ascii", "replace")
            if self.path != "/token":
                self.answer(404, {"error": "not_found"})
                return
            if args.hang_file and os.path.exists(args.hang_file):
                with lock:
                    count[0] += 1
                    log.write(json.dumps({"n": count[0], "ok": False,
                                          "why": "hang"}) + "\n")
                    log.flush()
                time.sleep(60)
                self.answer(503, {"error": "backend_error"})
                return
            if args.fail_file and os.path.exists(args.fail_file):
                with lock:
                    count[0] += 1
                    log.write(json.dumps({"n": count[0], "ok": False,
                                          "why": "outage"}) + "\n")
                    log.flush()
                self.answer(503, {"error": "backend_error"})
                return
            form = urllib.parse.parse_qs(raw, keep_blank_values=True)
            one = {k: v[0] for k, v in form.items() if len(v) == 1}
            grant = one.get("grant_type")
            aud = "http://127.0.0.1:%d/token" % self.server.server_address[1]
            why = None
            kind = None
            if len(one) != len(form):
                why = "a form field given twice"
            elif grant == JWT_BEARER:
                kind = "sa"
                why = check_jwt(one.get("assertion", ""), aud)
            elif grant == "refresh_token":
                kind = "user"
                if args.refresh_token is None:
                    why = "no authorized user configured"
                elif (one.get("client_id") != args.client_id or
                      one.get("client_secret") != args.client_secret or
                      one.get("refresh_token") != args.refresh_token):
                    why = "wrong client or refresh token"
            else:
                why = "grant_type %r" % grant
            ctype = self.headers.get("Content-Type", "")
            if why is None and ctype != "application/x-www-form-urlencoded":
                why = "Content-Type %r" % ctype
            with lock:
                count[0] += 1
                token = None
                if why is None:
                    token = "ya29.fake-%s-%d-%s" % (kind, count[0],
                                                    secrets.token_hex(12))
                log.write(json.dumps({
                    "n": count[0], "grant": kind, "ok": why is None,
                    "why": why, "token": token,
                    "assertion": one.get("assertion"),
                    "content_type": ctype}) + "\n")
                log.flush()
            if why is not None:
                self.answer(400, {"error": "invalid_grant",
                                  "error_description": why})
            else:
                self.answer(200, {"access_token": token,
                                  "expires_in": args.expires_in,
                                  "token_type": "Bearer"})

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
