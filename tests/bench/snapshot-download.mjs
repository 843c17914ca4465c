// The official client's way to fetch a whole repo, for prefetch-bench: @huggingface/hub's
// snapshotDownload (the version pinned in tests/js/package-lock.json) into an empty HF cache dir.
//   HF_TOKEN=hf_... node snapshot-download.mjs HUB_URL REPO CACHE_DIR
// Prints the snapshot folder. The token comes from the environment only.
//
// One shim, no shortcut: the client probes every file with `Range: bytes=0-0` and cannot
// download an empty file (model.done), whose probe gets 416 (tests/README.md, the JS cross-check).
// For that answer only, the shim hands the client what a 206 would have told it (size 0), so the
// client goes on to fetch the file itself as it does for every other file; the probe request is
// still made and counted.
import { snapshotDownload } from "@huggingface/hub";

const [hubUrl, repo, cacheDir] = process.argv.slice(2);
if (!hubUrl || !repo || !cacheDir) {
  console.error("usage: node snapshot-download.mjs HUB_URL REPO CACHE_DIR");
  process.exit(2);
}

async function fetchEmptyFilesToo(input, init) {
  const response = await fetch(input, init);
  const range = new Headers(init?.headers).get("Range");
  const contentRange = response.headers.get("Content-Range") ?? "";
  if (response.status === 416 && range === "bytes=0-0" && contentRange === "bytes */0") {
    await response.body?.cancel();
    const headers = new Headers(response.headers);
    headers.set("Content-Range", "bytes 0-0/0");
    return new Response(null, { status: 206, headers });
  }
  return response;
}

const folder = await snapshotDownload({
  repo,
  cacheDir,
  hubUrl,
  accessToken: process.env.HF_TOKEN || undefined,
  fetch: fetchEmptyFilesToo,
});
console.log(folder);
