// Proves the test Hub server (tests/hub_server) faithful to the official client: runs
// @huggingface/hub (version pinned in package-lock.json) against it and checks what comes back,
// plus what the client sent, through the server's access log.
//
//   node crosscheck.mjs --server PATH/TO/hub-server        starts a server on free ports
//   node crosscheck.mjs --url http://127.0.0.1:PORT         uses a running one (started with
//       tests/hub_server/example-config.json, --page-size 3, --multipart-threshold 2097152,
//       --multipart-chunk-size 2097152)
//
// Prints one line per check and exits non-zero when any check fails.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as hub from "@huggingface/hub";

const here = path.dirname(fileURLToPath(import.meta.url));
const MiB = 1024 * 1024;
const WRITE_TOKEN = "hf_alice_write";
const READ_TOKEN = "hf_alice_read";
const REPO = "alice/crosscheck";

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--") || argv[i + 1] === undefined) {
      throw new Error(`usage: node crosscheck.mjs (--server PATH | --url URL) [--config FILE]`);
    }
    args[argv[i].slice(2)] = argv[i + 1];
  }
  if (!args.server && !args.url) throw new Error("give --server PATH or --url URL");
  return args;
}

async function startServer(binary, config) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hub-crosscheck-"));
  const ready = path.join(dir, "ready.json");
  const child = spawn(
    binary,
    ["--data", path.join(dir, "data"), "--config", config, "--ready-file", ready,
     "--page-size", "3", "--multipart-threshold", String(2 * MiB),
     "--multipart-chunk-size", String(2 * MiB)],
    { stdio: ["ignore", "inherit", "inherit"] },
  );
  let exited = null;
  child.on("exit", (code) => (exited = code));
  for (let waited = 0; !fs.existsSync(ready); waited += 20) {
    if (exited !== null) throw new Error(`hub-server exited with ${exited} before it was ready`);
    if (waited > 10000) throw new Error("hub-server did not write its ready file within 10 s");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const { url } = JSON.parse(fs.readFileSync(ready, "utf8"));
  const stop = () => {
    child.kill("SIGTERM");
    fs.rmSync(dir, { recursive: true, force: true });
  };
  return { url, stop };
}

const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");
const gitBlobId = (bytes) =>
  createHash("sha1").update(Buffer.concat([Buffer.from(`blob ${bytes.length}\0`), bytes])).digest("hex");
const lfsPointer = (bytes) =>
  Buffer.from(`version https://git-lfs.github.com/spec/v1\noid sha256:${sha256(bytes)}\nsize ${bytes.length}\n`);

async function expectHubError(promise, status) {
  try {
    await promise;
  } catch (error) {
    assert.equal(error.statusCode, status, `expected HTTP ${status}, got: ${error.message}`);
    return error;
  }
  assert.fail(`expected an HTTP ${status} error, the call succeeded`);
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const config = args.config ?? path.join(here, "..", "hub_server", "example-config.json");
  const server = args.url ? { url: args.url.replace(/\/$/, ""), stop: () => {} } : await startServer(args.server, config);
  const hubUrl = server.url;
  const repo = { type: "model", name: REPO };
  const auth = { hubUrl, accessToken: WRITE_TOKEN };
  const admin = async (method, what, body) => {
    const res = await fetch(`${hubUrl}/_admin/${what}`, { method, body: body && JSON.stringify(body) });
    assert.ok(res.ok, `admin ${method} ${what}: ${res.status}`);
    return res.json();
  };
  const log = () => admin("GET", "log");

  const files = {
    "README.md": Buffer.from("# crosscheck\nuploaded by @huggingface/hub\n"),
    "config/config.json": Buffer.from(JSON.stringify({ model_type: "bert", layers: 2 })),
    "nested/a/b/deep.txt": Buffer.from("deep\n"),
    "nested/a/other.txt": Buffer.from("other\n"),
    "model.bin": randomBytes(1.5 * MiB), // LFS, one PUT
    "weights/model.safetensors": randomBytes(5 * MiB), // LFS, 3 parts of 2 MiB
  };
  let failures = 0;
  const check = async (name, fn) => {
    try {
      await fn();
      console.log(`ok - ${name}`);
    } catch (error) {
      failures++;
      console.log(`not ok - ${name}\n  ${String(error.stack ?? error).split("\n").join("\n  ")}`);
    }
  };

  try {
    await check("whoAmI returns the token's user, orgs and role", async () => {
      const me = await hub.whoAmI(auth);
      assert.equal(me.name, "alice");
      assert.equal(me.type, "user");
      assert.deepEqual(me.orgs.map((org) => org.name), ["acme"]);
      assert.equal(me.auth.accessToken.role, "write");
    });

    await check("whoAmI with an unknown token is a 401", async () => {
      const error = await expectHubError(hub.whoAmI({ hubUrl, accessToken: "hf_not_a_token" }), 401);
      assert.match(error.message, /Invalid credentials/);
    });

    await check("createRepo creates, a second create is a 409, a read token is a 403", async () => {
      const created = await hub.createRepo({ ...auth, repo });
      assert.equal(created.repoUrl, `${hubUrl}/${REPO}`);
      await expectHubError(hub.createRepo({ ...auth, repo }), 409);
      await expectHubError(hub.createRepo({ hubUrl, accessToken: READ_TOKEN, repo: "alice/nope" }), 403);
    });

    await check("repoExists: public, private without and with a token, missing", async () => {
      assert.equal(await hub.repoExists({ hubUrl, repo: "acme/public-cache" }), true);
      assert.equal(await hub.repoExists({ hubUrl, repo: "acme/private-cache" }), false);
      assert.equal(await hub.repoExists({ ...auth, repo: "acme/private-cache" }), true);
      assert.equal(await hub.repoExists({ ...auth, repo: "acme/missing" }), false);
    });

    let uploadCommit;
    await check("uploadFiles: regular, single-PUT LFS and multipart LFS files in one commit", async () => {
      await admin("DELETE", "log");
      const result = await hub.uploadFiles({
        ...auth,
        repo,
        useXet: false,
        commitTitle: "Upload crosscheck files",
        files: Object.entries(files).map(([p, bytes]) => ({ path: p, content: new Blob([bytes]) })),
      });
      uploadCommit = result.commit.oid;
      assert.match(uploadCommit, /^[0-9a-f]{40}$/);
      assert.equal(result.commit.url, `${hubUrl}/${REPO}/commit/${uploadCommit}`);

      const entries = await log();
      const cdn = entries.filter((e) => e.listener === "cdn");
      const single = cdn.filter((e) => e.path === `/lfs/upload/${sha256(files["model.bin"])}`);
      assert.equal(single.length, 1, "one PUT for model.bin");
      assert.equal(single[0].bytes_in, files["model.bin"].length);
      const parts = cdn.filter((e) => e.path.startsWith(`/lfs/upload/${sha256(files["weights/model.safetensors"])}/part/`));
      assert.equal(parts.length, 3, "three 2 MiB parts for the 5 MiB file");
      assert.ok(cdn.every((e) => e.method === "PUT" && e.status === 200 && !e.authorization),
        "storage PUTs carry no Hub token and succeed");
      const completion = entries.filter((e) => e.path === "/api/complete_multipart");
      assert.equal(completion.length, 1);
      assert.equal(completion[0].authorization, false, "multipart completion is sent without the token");
      assert.equal(completion[0].status, 200);
      const batch = entries.filter((e) => e.path === `/${REPO}.git/info/lfs/objects/batch`);
      assert.equal(batch.length, 1);
      assert.ok(batch[0].authorization && batch[0].status === 200);
      const commit = entries.filter((e) => e.path === `/api/models/${REPO}/commit/main`);
      assert.equal(commit.length, 1);
      assert.equal(commit[0].status, 200);
    });

    await check("uploading the same LFS content again skips the storage PUT", async () => {
      await admin("DELETE", "log");
      await hub.uploadFiles({
        ...auth, repo, useXet: false,
        files: [{ path: "copy/model.bin", content: new Blob([files["model.bin"]]) }],
      });
      files["copy/model.bin"] = files["model.bin"];
      const entries = await log();
      assert.equal(entries.filter((e) => e.listener === "cdn").length, 0);
    });

    await check("listFiles recursive follows the Link header across pages, with git ids", async () => {
      await admin("DELETE", "log");
      const listed = [];
      for await (const entry of hub.listFiles({ ...auth, repo, recursive: true })) listed.push(entry);
      const tree = (await log()).filter((e) => e.path.startsWith(`/api/models/${REPO}/tree/main`));
      assert.ok(tree.length >= 2, `expected several pages, got ${tree.length} request(s)`);
      assert.ok(tree.slice(1).every((e) => e.query.includes("cursor=")));
      const dirs = ["config", "copy", "nested", "nested/a", "nested/a/b", "weights"];
      assert.deepEqual(
        listed.map((e) => e.path).sort(),
        [".gitattributes", ...Object.keys(files), ...dirs].sort(),
      );
      for (const [p, bytes] of Object.entries(files)) {
        const entry = listed.find((e) => e.path === p);
        assert.equal(entry.type, "file");
        assert.equal(entry.size, bytes.length);
        if (p.endsWith(".bin") || p.endsWith(".safetensors")) {
          assert.deepEqual(entry.lfs, { oid: sha256(bytes), size: bytes.length, pointerSize: lfsPointer(bytes).length });
          assert.equal(entry.oid, gitBlobId(lfsPointer(bytes)), `${p}: oid is the pointer's blob id`);
        } else {
          assert.equal(entry.lfs, undefined);
          assert.equal(entry.oid, gitBlobId(bytes), `${p}: oid is the git blob id`);
        }
      }
      for (const dir of dirs) assert.equal(listed.find((e) => e.path === dir).type, "directory");
    });

    await check("listFiles of a sub-folder, and of a missing one (404)", async () => {
      const listed = [];
      for await (const entry of hub.listFiles({ ...auth, repo, path: "nested/a" })) listed.push(entry.path);
      assert.deepEqual(listed.sort(), ["nested/a/b", "nested/a/other.txt"]);
      const missing = async () => {
        for await (const entry of hub.listFiles({ ...auth, repo, path: "nope" })) void entry;
      };
      await expectHubError(missing(), 404);
    });

    await check("pathsInfo (JSON body) with expand gives lastCommit, skips missing paths", async () => {
      const infos = await hub.pathsInfo({ ...auth, repo, paths: ["README.md", "model.bin", "missing.txt"], expand: true });
      assert.deepEqual(infos.map((i) => i.path).sort(), ["README.md", "model.bin"]);
      const readme = infos.find((i) => i.path === "README.md");
      assert.equal(readme.lastCommit.id, uploadCommit);
      assert.equal(readme.lastCommit.title, "Upload crosscheck files");
      assert.equal(infos.find((i) => i.path === "model.bin").lfs.oid, sha256(files["model.bin"]));
    });

    await check("modelInfo (revision HEAD) names the repo", async () => {
      const info = await hub.modelInfo({ ...auth, name: REPO });
      assert.equal(info.name, REPO);
      assert.equal(info.private, false);
    });

    await check("downloadFile of every file is byte-identical; storage GETs carry no token", async () => {
      await admin("DELETE", "log");
      for (const [p, bytes] of Object.entries(files)) {
        const blob = await hub.downloadFile({ ...auth, repo, path: p });
        assert.ok(blob, `${p} downloaded`);
        const got = Buffer.from(await blob.arrayBuffer());
        assert.equal(got.length, bytes.length, `${p}: size`);
        assert.equal(sha256(got), sha256(bytes), `${p}: sha256`);
      }
      assert.equal(await hub.downloadFile({ ...auth, repo, path: "missing.bin" }), null);
      const entries = await log();
      const cdn = entries.filter((e) => e.listener === "cdn");
      assert.ok(cdn.length >= 3, "LFS files came from the CDN listener");
      assert.ok(cdn.every((e) => !e.authorization && (e.status === 200 || e.status === 206)),
        "the redirect to storage dropped the Authorization header");
      assert.ok(entries.some((e) => e.listener === "hub" && e.status === 302));
      // Regular files: a 307 within the Hub to their commit's /api/resolve-cache/ URL, which the
      // client follows with its token and whose answer names the file (ETag, X-Repo-Commit).
      assert.ok(entries.some((e) => e.status === 307 && e.path.includes("/resolve/")),
        "a regular file's resolve redirected within the Hub");
      assert.ok(entries.some((e) => e.path.startsWith("/api/resolve-cache/") && e.authorization &&
        (e.status === 200 || e.status === 206)), "the pinned URL served the file");
      assert.ok(entries.some((e) => e.range === "bytes=0-0" && e.status === 206));
    });

    if (args.transfer) {
      // neuron-cache's C++ client (tests/tools/hub_transfer.cpp) against the official one. The
      // token goes through the environment, never the command line.
      const transfer = (...argv) => {
        const run = spawnSync(args.transfer, argv, {
          env: { ...process.env, HF_ENDPOINT: hubUrl, HF_TOKEN: WRITE_TOKEN },
          encoding: "utf8",
        });
        assert.equal(run.status, 0, `hub-transfer ${argv.join(" ")}: ${run.stderr}${run.stdout}`);
      };
      await check("what @huggingface/hub uploaded, neuron-cache downloads byte-identical", async () => {
        const out = fs.mkdtempSync(path.join(os.tmpdir(), "hub-transfer-"));
        try {
          for (const [p, bytes] of Object.entries(files)) {
            const target = path.join(out, "file");
            transfer("download", REPO, p, target);
            assert.equal(sha256(fs.readFileSync(target)), sha256(bytes), `${p}: sha256`);
          }
        } finally {
          fs.rmSync(out, { recursive: true, force: true });
        }
      });
      await check("what neuron-cache uploaded, @huggingface/hub downloads byte-identical", async () => {
        const fromCpp = { type: "model", name: "alice/from-neuron-cache" };
        await hub.createRepo({ ...auth, repo: fromCpp });
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hub-transfer-"));
        const ours = {
          "neuronxcc-2.21.33363.0+82129205/MODULE_1+d7cde3b5/compile_flags.json":
            Buffer.from('["--model-type=transformer", "--auto-cast=none"]'),
          "neuronxcc-2.21.33363.0+82129205/MODULE_1+d7cde3b5/model.done": Buffer.alloc(0),
          "neuronxcc-2.21.33363.0+82129205/MODULE_1+d7cde3b5/model.neff": randomBytes(1.5 * MiB),
          "neuronxcc-2.21.33363.0+82129205/MODULE_1+d7cde3b5/model.hlo_module.pb": randomBytes(5 * MiB),
        };
        try {
          for (const [p, bytes] of Object.entries(ours)) {
            fs.mkdirSync(path.dirname(path.join(dir, p)), { recursive: true });
            fs.writeFileSync(path.join(dir, p), bytes);
          }
          transfer("upload", fromCpp.name, dir);
          const listed = new Map();
          for await (const f of hub.listFiles({ ...auth, repo: fromCpp, recursive: true })) {
            listed.set(f.path, f);
          }
          for (const [p, bytes] of Object.entries(ours)) {
            assert.equal(listed.get(p)?.size, bytes.length, `${p}: listed size`);
          }
          for (const [p, bytes] of Object.entries(ours)) {
            // @huggingface/hub probes with Range: bytes=0-0, which an empty file cannot satisfy
            // (416); its size is checked in the listing instead.
            if (bytes.length === 0) continue;
            const blob = await hub.downloadFile({ ...auth, repo: fromCpp, path: p });
            assert.ok(blob, `${p} downloaded`);
            assert.equal(sha256(Buffer.from(await blob.arrayBuffer())), sha256(bytes), `${p}: sha256`);
          }
        } finally {
          fs.rmSync(dir, { recursive: true, force: true });
        }
      });
    }

    await check("private repo: downloads need the token", async () => {
      const blob = await hub.downloadFile({ ...auth, repo: "acme/private-cache", path: "README.md" });
      assert.equal(await blob.text(), "# private acme cache\n");
      await expectHubError(hub.downloadFile({ hubUrl, repo: "acme/private-cache", path: "README.md" }), 401);
    });

    await check("fileExists (HEAD raw)", async () => {
      assert.equal(await hub.fileExists({ ...auth, repo, path: "README.md" }), true);
      assert.equal(await hub.fileExists({ ...auth, repo, path: "weights/model.safetensors" }), true);
      assert.equal(await hub.fileExists({ ...auth, repo, path: "nope.txt" }), false);
    });

    await check("commit with a stale parentCommit is a 412", async () => {
      const parent = (await hub.modelInfo({ ...auth, name: REPO, additionalFields: ["sha"] })).sha;
      await hub.uploadFiles({ ...auth, repo, useXet: false, files: [{ path: "extra.txt", content: new Blob(["x"]) }] });
      const stale = hub.uploadFiles({
        ...auth, repo, useXet: false, parentCommit: parent,
        files: [{ path: "extra2.txt", content: new Blob(["y"]) }],
      });
      await expectHubError(stale, 412);
    });

    await check("deleteFile removes a file; deleting a missing file is a 404", async () => {
      const result = await hub.deleteFile({ ...auth, repo, path: "README.md" });
      assert.match(result.commit.oid, /^[0-9a-f]{40}$/);
      assert.equal(await hub.fileExists({ ...auth, repo, path: "README.md" }), false);
      await expectHubError(hub.deleteFile({ ...auth, repo, path: "README.md" }), 404);
    });

    await check("listCommits walks the history, newest first", async () => {
      const titles = [];
      for await (const commit of hub.listCommits({ ...auth, repo })) titles.push(commit.title);
      assert.deepEqual(titles, ["Delete README.md", "Add 1 files", "Add 1 files", "Upload crosscheck files", "initial commit"]);
    });

    await check("deleteRepo, then the repo is gone", async () => {
      await hub.deleteRepo({ ...auth, repo });
      assert.equal(await hub.repoExists({ ...auth, repo }), false);
    });
  } finally {
    server.stop();
  }
  console.log(failures === 0 ? "all checks passed" : `${failures} check(s) failed`);
  process.exitCode = failures === 0 ? 0 : 1;
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
