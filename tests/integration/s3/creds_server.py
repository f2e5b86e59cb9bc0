#!/usr/bin/python3
"""A small local HTTP server that answers as the AWS credential endpoints
would, for test_s3.sh's credential-chain checks. Binds 127.0.0.1 only.

    creds_server.py PORT_FILE LOG_FILE --key-id ID [--lifetime SECONDS]
                    [--container-token TOKEN] [--web-token TOKEN]
                    [--role-arn ARN]

Writes its port to PORT_FILE once listening. Serves:
  PUT  /latest/api/token                          IMDSv2 session token
  GET  /latest/meta-data/iam/security-credentials/      role name
  GET  /latest/meta-data/iam/security-credentials/ROLE  credentials JSON
       (both need the X-aws-ec2-metadata-token from the PUT, as IMDSv2)
  GET  /container/creds     container credentials JSON (needs the
                            Authorization header to equal --container-token)
  POST /sts/                STS AssumeRoleWithWebIdentity (the form's
                            WebIdentityToken and RoleArn must match)
Every credential handed out has AccessKeyId ID (s3rver checks only the
key id), a secret and session token numbered by issue, and expires after
--lifetime seconds. Each request appends one line to LOG_FILE:
"METHOD PATH -> STATUS [note]", so the test can tell which source was used
and how often credentials were fetched.
"""
import argparse
import datetime
import http.server
import json
import threading
import urllib.parse

IMDS_TOKEN = "imds-session-token-42"
ROLE = "shardfs-test-role"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port_file")
    ap.add_argument("log_file")
    ap.add_argument("--key-id", required=True)
    ap.add_argument("--lifetime", type=int, default=3600)
    ap.add_argument("--container-token", default="container-auth-token")
    ap.add_argument("--web-token", default="web-identity-jwt")
    ap.add_argument("--role-arn", default="arn:aws:iam::123456789012:role/r")
    args = ap.parse_args()
    lock = threading.Lock()
    issued = [0]

    def creds():
        with lock:
            issued[0] += 1
            n = issued[0]
        exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=args.lifetime)
        return {
            "AccessKeyId": args.key_id,
            "SecretAccessKey": "test-secret-%d" % n,
            "Token": "test-session-token-%d" % n,
            "Expiration": exp.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "n": n,
        }

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def reply(self, status, body, ctype="application/json", note=""):
            # Logged before the reply is sent: a client that has its
            # reply finds the line in the log, in the order it asked
            # (requests on two connections are two threads here), and no
            # line of its lands after the test has moved on and truncated
            # the log (test_s3's chain checks failed so under load).
            with lock, open(args.log_file, "a") as f:
                f.write("%s %s -> %d %s\n" % (self.command, self.path, status, note))
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_PUT(self):
            if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                self.reply(200, IMDS_TOKEN, "text/plain")
            else:
                self.reply(400, "bad token request", "text/plain")

        def do_GET(self):
            p = self.path
            base = "/latest/meta-data/iam/security-credentials/"
            if p.startswith(base):
                if self.headers.get("X-aws-ec2-metadata-token") != IMDS_TOKEN:
                    self.reply(401, "", "text/plain", "no imds token")
                elif p == base:
                    self.reply(200, ROLE, "text/plain")
                elif p == base + ROLE:
                    c = creds()
                    self.reply(200, json.dumps({"Code": "Success", **c}), note="issued %d" % c["n"])
                else:
                    self.reply(404, "", "text/plain")
            elif p == "/container/creds":
                if self.headers.get("Authorization") != args.container_token:
                    self.reply(403, "{}", note="bad authorization")
                else:
                    c = creds()
                    self.reply(200, json.dumps(c), note="issued %d" % c["n"])
            else:
                self.reply(404, "", "text/plain")

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            form = urllib.parse.parse_qs(self.rfile.read(n).decode())
            one = {k: v[0] for k, v in form.items()}
            if self.path != "/sts/" or one.get("Action") != "AssumeRoleWithWebIdentity":
                self.reply(400, "<Error><Code>InvalidAction</Code></Error>", "text/xml")
                return
            if one.get("WebIdentityToken") != args.web_token or one.get("RoleArn") != args.role_arn:
                self.reply(403, "<ErrorResponse><Error><Code>AccessDenied</Code>"
                           "<Message>bad token or role</Message></Error></ErrorResponse>",
                           "text/xml", "bad web identity")
                return
            c = creds()
            body = (
                '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
                "<AssumeRoleWithWebIdentityResult><Credentials>"
                "<AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey>"
                "<SessionToken>%s</SessionToken><Expiration>%s</Expiration>"
                "</Credentials></AssumeRoleWithWebIdentityResult>"
                "</AssumeRoleWithWebIdentityResponse>"
                % (c["AccessKeyId"], c["SecretAccessKey"], c["Token"], c["Expiration"])
            )
            self.reply(200, body, "text/xml", "issued %d session=%s" % (c["n"], one.get("RoleSessionName", "")))

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.rename(args.port_file + ".tmp", args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
