// h2client: what node's http2 module (nghttp2 inside node) reports for one request, as one JSON line.
//
//   node h2client.mjs [-cacert PEM] [-timeout MS] [-method GET] [-body TEXT] URL
//
// https:// negotiates h2 by ALPN (trusting -cacert), http:// speaks h2c with prior knowledge. The line has the
// status and body length, or the error: the stream's or the session's code (ERR_HTTP2_…), its message, and the
// HTTP/2 error code node names (`Session closed with error code 9`). What node *sent* about it (GOAWAY,
// RST_STREAM) is for the server's journal to say. After the answer (or the error) the session is closed the way
// an application closes it (`close()`: GOAWAY NO_ERROR when the session is still usable). Built-ins only.
import fs from "node:fs";
import http2 from "node:http2";

const options = { cacert: null, timeout: 3000, method: "GET", body: null };
const args = process.argv.slice(2);
let url = null;
for (let i = 0; i < args.length; i++) {
    switch (args[i]) {
        case "-cacert": options.cacert = args[++i]; break;
        case "-timeout": options.timeout = Number(args[++i]); break;
        case "-method": options.method = args[++i]; break;
        case "-body": options.body = args[++i]; break;
        default: url = args[i];
    }
}
if (!url) {
    console.error("usage: node h2client.mjs [-cacert PEM] [-timeout MS] [-method GET] [-body TEXT] URL");
    process.exit(2);
}

const target = new URL(url);
const result = { url, status: null, bodyLength: 0, error: null, code: null, errno: null };
let done = false;
const session = http2.connect(target.origin, options.cacert ? { ca: fs.readFileSync(options.cacert) } : {});

function finish(error) {
    if (done) return;
    done = true;
    if (error) {
        result.error = String(error.message).slice(0, 200);
        result.code = error.code ?? null;
        // `Session closed with error code 9` / `Stream closed with error code NGHTTP2_REFUSED_STREAM`.
        const named = /error code (\w+)/.exec(result.error);
        result.errno = named ? named[1] : null;
    }
    clearTimeout(timer);
    process.stdout.write(JSON.stringify(result) + "\n");
    // The application is done with the session: close() lets nghttp2 send its GOAWAY, then the socket ends.
    if (!session.destroyed && !session.closed) session.close();
    setTimeout(() => { session.destroy(); process.exit(0); }, 200).unref();
}

const timer = setTimeout(() => finish(new Error(`timed out after ${options.timeout} ms`)), options.timeout);
session.on("error", finish);
session.on("goaway", (code) => { if (code !== 0) finish(new Error(`server GOAWAY with error code ${code}`)); });

const headers = { ":method": options.method, ":path": target.pathname + target.search };
const stream = session.request(headers, { endStream: options.body === null });
if (options.body !== null) stream.end(options.body);
stream.on("response", (responseHeaders) => { result.status = responseHeaders[":status"]; });
stream.on("data", (chunk) => { result.bodyLength += chunk.length; });
stream.on("end", () => finish(null));
stream.on("error", finish);
stream.on("close", () => {
    if (stream.rstCode && stream.rstCode !== 0) finish(new Error(`Stream closed with error code ${stream.rstCode}`));
});
