#!/usr/bin/env python3
"""A smart-HTTP Git server: Git's own `git http-backend` (CGI) behind a small threading HTTP
server, serving the bare repositories under a folder as a Git host does (upload-pack builds the
packs a fetch receives, receive-pack applies a push and takes its ref locks itself).

    git_http_server.py ROOT PORT [--bind ADDRESS] [--user NAME --password SECRET]

With --user and --password every request but GET /healthz needs that basic auth; without, the
server is anonymous (pushes need `http.receivepack true` in the repository's config). Used by the
local stack (`Stack(git_server="http")`) and, in a container, by the chart-run test."""
import argparse
import base64
import http.server
import subprocess

HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"


def handler_for(root, want_auth):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.handle_git()

        def do_POST(self):
            self.handle_git()

        def read_body(self):
            if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b""  # libgit2 sends pushes chunked
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()

        def handle_git(self):
            if self.path == "/healthz":
                self.send_response(200)
                self.end_headers()
                return
            if want_auth and self.headers.get("Authorization") != want_auth:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.end_headers()
                return
            path, _, query = self.path.partition("?")
            body = self.read_body()
            env = {"GIT_PROJECT_ROOT": root, "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": path,
                   "QUERY_STRING": query, "REQUEST_METHOD": self.command,
                   "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
                   "GIT_CONFIG_NOSYSTEM": "1", "HOME": root, "PATH": "/usr/bin:/bin"}
            if want_auth:
                env["REMOTE_USER"] = "git"
            if self.headers.get("Content-Encoding"):
                env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
            if self.headers.get("Git-Protocol"):
                env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
            out = subprocess.run([HTTP_BACKEND], input=body, env=env, capture_output=True).stdout
            head, sep, payload = out.partition(b"\r\n\r\n")
            if not sep:
                head, _, payload = out.partition(b"\n\n")
            status = 200
            headers = []
            for line in head.decode(errors="replace").splitlines():
                key, _, value = line.partition(":")
                if key.lower() == "status":
                    status = int(value.strip().split()[0])
                else:
                    headers.append((key, value.strip()))
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", help="folder holding the bare repositories")
    parser.add_argument("port", type=int)
    parser.add_argument("--bind", default="0.0.0.0")
    parser.add_argument("--user")
    parser.add_argument("--password")
    args = parser.parse_args()
    want_auth = None
    if args.user is not None or args.password is not None:
        if not args.user or not args.password:
            parser.error("--user and --password go together")
        want_auth = "Basic " + base64.b64encode(f"{args.user}:{args.password}".encode()).decode()
    server = http.server.ThreadingHTTPServer((args.bind, args.port), handler_for(args.root, want_auth))
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
