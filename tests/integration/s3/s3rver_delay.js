'use strict';
// s3rver with a fixed delay before every request, to stand in for a store
// with real first-byte latency (make bench's latency phases).
//
//   S3RVER_DELAY_MS=20 node --openssl-legacy-provider s3rver_delay.js \
//       build/s3rver/node_modules/s3rver/bin/s3rver.js [s3rver's own options]
//
// It runs s3rver's own command line (so the options are the suites'), after
// putting one middleware first in the Koa chain: it waits N ms on a timer,
// which costs no CPU, so many delayed requests overlap as they would against
// a remote store. With S3RVER_DELAY_MS unset or 0 it is plain s3rver.
const path = require('path');

const bin = path.resolve(process.argv[2] || '');
const delay = Number(process.env.S3RVER_DELAY_MS || 0);
if (!process.argv[2] || !Number.isFinite(delay) || delay < 0) {
  console.error('usage: S3RVER_DELAY_MS=N node s3rver_delay.js .../s3rver/bin/s3rver.js [options]');
  process.exit(2);
}
const S3rver = require(path.join(path.dirname(bin), '..'));
if (delay > 0) {
  const run = S3rver.prototype.run;
  S3rver.prototype.run = function (...args) {
    // Koa composes this.middleware when the server starts listening (in
    // run), so the delay placed here comes before the logger and the router.
    this.middleware.unshift(async (ctx, next) => {
      await new Promise(resolve => setTimeout(resolve, delay));
      return next();
    });
    return run.apply(this, args);
  };
}
// s3rver's command line parser reads process.argv from index 2.
process.argv.splice(2, 1);
require(bin);
