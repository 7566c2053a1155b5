// fetchclient.mjs: what node's built-in fetch (undici) reports for each request, as one JSON line per URL.
//
//   node fetchclient.mjs [--timeout MS] [--method GET] [--body TEXT] [--idempotency-key PREFIX] URL...
//
// The URLs are fetched in order in one process, so undici's global dispatcher reuses a kept-alive connection.
// AbortSignal.timeout(MS) covers the whole exchange, body included. Each line has the status, body length and
// whether the body parsed as JSON, or the error: name, code and message of the error and of each `cause`.
// Built-ins only.
const args = process.argv.slice(2);
const options = { timeout: 1000, method: 'GET', body: undefined, key: undefined };
const urls = [];
for (let i = 0; i < args.length; i++) {
  switch (args[i]) {
    case '--timeout': options.timeout = Number(args[++i]); break;
    case '--method': options.method = args[++i]; break;
    case '--body': options.body = args[++i]; break;
    case '--idempotency-key': options.key = args[++i]; break;
    default: urls.push(args[i]);
  }
}

function chain(error) {
  const links = [];
  for (let e = error, depth = 0; e != null && depth < 8; e = e.cause, depth++) {
    if (typeof e !== 'object') { links.push({ name: typeof e, message: String(e) }); break; }
    links.push({ name: e.name, constructor: e.constructor?.name, code: e.code, message: e.message });
  }
  return links;
}

for (const [index, url] of urls.entries()) {
  const result = { url, bodyLength: 0, parsed: false };
  const headers = {};
  if (options.key) headers['Idempotency-Key'] = `${options.key}-${index + 1}`;
  let phase = 'fetch';
  try {
    const response = await fetch(url, { method: options.method, body: options.body, headers,
                                        signal: AbortSignal.timeout(options.timeout) });
    result.status = response.status;
    result.contentType = response.headers.get('content-type');
    phase = 'body';
    const bytes = new Uint8Array(await response.arrayBuffer());
    result.bodyLength = bytes.length;
    try { JSON.parse(new TextDecoder().decode(bytes)); result.parsed = true; } catch { /* not JSON */ }
  } catch (error) {
    result.phase = phase;
    result.chain = chain(error);
  }
  console.log(JSON.stringify(result));
}
