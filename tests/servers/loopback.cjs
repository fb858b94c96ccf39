// Preloaded with `node --require` so that every server this process starts listens on
// 127.0.0.1 only (server-everything binds all interfaces otherwise), and so that the port it
// got (PORT=0 asks the OS for a free one) is announced on stderr as `listening on HOST:PORT`.
"use strict";
const net = require("net");
const listen = net.Server.prototype.listen;

net.Server.prototype.listen = function (...args) {
  const [first, second] = args;
  if (first !== null && typeof first === "object") {
    args[0] = { ...first, host: "127.0.0.1" };
  } else if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    // listen(port[, host][, backlog][, callback]): replace or insert the host.
    args = typeof second === "string" ? [first, "127.0.0.1", ...args.slice(2)] : [first, "127.0.0.1", ...args.slice(1)];
  }
  this.once("listening", () => {
    const address = this.address();
    if (address && typeof address === "object") {
      process.stderr.write(`listening on ${address.address}:${address.port}\n`);
    }
  });
  return listen.apply(this, args);
};
