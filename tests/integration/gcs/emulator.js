// The Firebase Storage emulator's GCS JSON API, started straight from Node
// for shardfs' GCS tests: `firebase emulators:start` needs Java and
// downloads a jar, and neither is needed for the GCS JSON API routes.
//
//   node emulator.js PORT     (NODE_PATH names the node_modules holding
//                              firebase-tools, pinned by package-lock.json)
//
// Listens on 127.0.0.1:PORT only. The Firebase rules runtime (the Java part)
// is never started: its start/stop are replaced by no-ops, which is safe
// because the GCS JSON API routes never consult rules. Nothing here makes
// an outside connection. Objects live in memory and under os.tmpdir()
// (the caller points TMPDIR at a directory of its own). Stops on SIGTERM
// or SIGINT.
"use strict";

const path = require("path");

function fbRequire(rel) {
	return require(path.join("firebase-tools", "lib", "emulator", rel));
}

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port < 1 || port > 65535) {
	console.error("usage: node emulator.js PORT");
	process.exit(2);
}

const { StorageEmulator } = fbRequire("storage");
const { StorageRulesRuntime } = fbRequire(path.join("storage", "rules", "runtime"));
const { EmulatorRegistry } = fbRequire("registry");

StorageRulesRuntime.prototype.start = async function () {};
StorageRulesRuntime.prototype.stop = async function () {};

const emulator = new StorageEmulator({
	projectId: "demo-test",
	host: "127.0.0.1",
	port: port,
	rules: [],
	auto_download: false,
});

async function main() {
	await EmulatorRegistry.start(emulator);
	console.log(`gcs emulator listening on 127.0.0.1:${port}`);
}

let stopping = false;
async function stop() {
	if (stopping) return;
	stopping = true;
	try {
		await EmulatorRegistry.stop(emulator.getName());
	} catch (e) {
		console.error(`stop: ${e}`);
	}
	process.exit(0);
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);

main().catch((e) => {
	console.error(`gcs emulator failed to start: ${e && e.stack ? e.stack : e}`);
	process.exit(1);
});
