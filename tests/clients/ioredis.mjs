// ioredis against Shoal, as an application uses it: connect (its ready
// check reads INFO), a transaction, a pipeline, scanStream and
// hscanStream. Prints one JSON object of what it saw; tests/redis_clients.rs
// checks it.
//
//   node ioredis.mjs <host> <port> <api-key>
import Redis from 'ioredis';

const [host, port, key] = process.argv.slice(2);
const redis = new Redis({ host, port: Number(port), username: 'cache', password: key, maxRetriesPerRequest: 1 });
const seen = {};

seen.transaction = await redis.multi().set('t:a', '1').incr('t:a').get('t:a').exec();
const pipeline = redis.pipeline();
for (let i = 0; i < 500; i++) pipeline.incr(`count:${i % 7}`);
const counted = await pipeline.exec();
seen.pipeline = counted.length;
seen.count0 = await redis.get('count:0');

const stream = (options) =>
  new Promise((resolve, reject) => {
    const found = [];
    options.on('data', (batch) => found.push(...batch));
    options.on('end', () => resolve(found));
    options.on('error', reject);
  });
const keys = new Set(await stream(redis.scanStream({ match: 'count:*', count: 3 })));
seen.scanned = keys.size;
await redis.hset('hash', Object.fromEntries([...Array(50).keys()].map((i) => [`f${i}`, `v${i}`])));
const pairs = await stream(redis.hscanStream('hash', { count: 10 }));
seen.hscanned = pairs.length / 2;
seen.renamed = [await redis.rename('t:a', 't:b'), await redis.get('t:b')];
seen.copied = [await redis.copy('t:b', 't:c'), await redis.get('t:c')];
seen.client = (await redis.client('LIST')).split('\n').filter((l) => l).length;
console.log(JSON.stringify(seen));
redis.disconnect();
