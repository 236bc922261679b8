// node-redis against Shoal, as an application uses it: connect (RESP2 or
// RESP3), a transaction, a pipeline, scanIterator and hScanIterator, and
// the commands clients trip over when they are missing. Prints one JSON
// object of what it saw; tests/redis_clients.rs checks it.
//
//   node node_redis.mjs <host> <port> <api-key> <2|3>
import { createClient } from 'redis';

const [host, port, key, resp] = process.argv.slice(2);
const client = createClient({
  url: `redis://cache:${encodeURIComponent(key)}@${host}:${port}`,
  RESP: Number(resp),
});
client.on('error', (e) => {
  console.error(e);
  process.exit(1);
});
await client.connect();
const seen = {};

seen.transaction = await client.multi().set('t:a', '1').incr('t:a').get('t:a').exec();
const pipeline = client.multi();
for (let i = 0; i < 500; i++) pipeline.set(`scan:${i}`, String(i));
await pipeline.execAsPipeline();
seen.pipeline = (await client.mGet(['scan:0', 'scan:499', 'scan:500'])).map(String);

const keys = new Set();
for await (const batch of client.scanIterator({ MATCH: 'scan:*', COUNT: 50 })) {
  for (const k of [].concat(batch)) keys.add(k);
}
seen.scanned = keys.size;

await client.hSet('hash', Object.fromEntries([...Array(300).keys()].map((i) => [`f${i}`, `v${i}`])));
const fields = new Map();
for await (const batch of client.hScanIterator('hash', { MATCH: 'f1*' })) {
  for (const entry of [].concat(batch)) fields.set(entry.field, entry.value);
}
seen.hscanned = fields.size;
seen.f17 = fields.get('f17');

await client.setEx('ex', 100, 'v');
seen.ttl = await client.ttl('ex');
seen.setnx = [await client.setNX('nx', '1'), await client.setNX('nx', '2')];
seen.getdel = [await client.getDel('nx'), await client.exists('nx')];
seen.unlink = await client.unlink(['ex', 'missing']);
seen.incrbyfloat = await client.incrByFloat('f', 10.5);
seen.incrbyfloat2 = await client.incrByFloat('f', 0.1);
seen.config = await client.configGet('maxmemory-policy');
seen.flushdb = await client.flushDb();
seen.dbsize = await client.dbSize();
console.log(JSON.stringify(seen));
await client.quit();
