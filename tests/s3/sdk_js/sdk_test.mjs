// The AWS SDK for JavaScript v3 against an Apus proxy with s3api, with the SDK's default
// integrity checks (CRC32 on every upload, as a header or an aws-chunked trailer; checksums of
// responses validated when the server sends them): a bucket made, single and multipart uploads
// (lib-storage, parts uploaded in parallel), listings, downloads compared byte for byte, a
// ranged GET, DeleteObjects and DeleteBucket. Prints one line per step; exits non-zero at the
// first failure.
//   node sdk_test.mjs <endpoint> <access key> <secret>
import { Readable } from "node:stream";
import { createHash, randomBytes } from "node:crypto";
import {
  S3Client, CreateBucketCommand, PutObjectCommand, GetObjectCommand, HeadObjectCommand,
  ListObjectsV2Command, DeleteObjectsCommand, DeleteBucketCommand, ListMultipartUploadsCommand,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";

const [endpoint, accessKeyId, secretAccessKey] = process.argv.slice(2);
const s3 = new S3Client({
  endpoint, region: "us-east-1", forcePathStyle: true,
  credentials: { accessKeyId, secretAccessKey },
  maxAttempts: 1,
});
const bucket = "sdk-js-" + Date.now();

function check(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
  console.log("ok:", what);
}
const md5 = (b) => createHash("md5").update(b).digest("hex");
async function body(resp) { return Buffer.from(await resp.Body.transformToByteArray()); }

const small = Buffer.from("hello from the AWS SDK for JavaScript v3\n");
const streamed = randomBytes(300 * 1024 + 7);
const big = randomBytes(12 * 1024 * 1024 + 12345);

await s3.send(new CreateBucketCommand({ Bucket: bucket }));
check(true, "CreateBucket " + bucket);

await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "small.txt", Body: small,
                                     ContentType: "text/plain", Metadata: { color: "blue" } }));
check(true, "PutObject of a buffer");

// A stream of known length goes aws-chunked, its CRC32 in a trailer.
await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "dir/streamed.bin",
                                     Body: Readable.from([streamed.subarray(0, 100000),
                                                          streamed.subarray(100000)]),
                                     ContentLength: streamed.length }));
check(true, "PutObject of a stream");

const upload = new Upload({ client: s3, queueSize: 3, partSize: 5 * 1024 * 1024,
                            params: { Bucket: bucket, Key: "dir/big.bin", Body: big,
                                      ContentType: "application/x-big" } });
const done = await upload.done();
check(/^"[0-9a-f]{32}-3"$/.test(done.ETag), "multipart Upload of 3 parts: ETag " + done.ETag);

const uploads = await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
check((uploads.Uploads || []).length === 0, "no upload left in progress");

const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
const keys = (listed.Contents || []).map((o) => o.Key).sort();
check(JSON.stringify(keys) === JSON.stringify(["dir/big.bin", "dir/streamed.bin", "small.txt"]),
      "ListObjectsV2: " + keys.join(", "));
const delimited = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Delimiter: "/" }));
check((delimited.CommonPrefixes || []).map((p) => p.Prefix).join() === "dir/",
      "ListObjectsV2 with a delimiter");

const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "small.txt" }));
check((await body(got)).equals(small) && got.Metadata.color === "blue" &&
      got.ContentType === "text/plain", "GetObject of the small object, metadata and type");
const gotStreamed = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "dir/streamed.bin" }));
check(md5(await body(gotStreamed)) === md5(streamed), "GetObject of the streamed object");
const gotBig = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "dir/big.bin" }));
check(md5(await body(gotBig)) === md5(big), "GetObject of the multipart object");
const ranged = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "dir/big.bin",
                                                    Range: "bytes=5242870-5242889" }));
check((await body(ranged)).equals(big.subarray(5242870, 5242890)),
      "ranged GetObject across a part boundary");
// The SDK asks for checksums (x-amz-checksum-mode) and validates a whole object's.
const checked = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "small.txt",
                                                     ChecksumMode: "ENABLED" }));
check((await body(checked)).equals(small) && /^[A-Za-z0-9+/]{6}==$/.test(checked.ChecksumCRC32 || ""),
      "GetObject with ChecksumMode: CRC32 " + checked.ChecksumCRC32 + ", validated by the SDK");
// The streamed object's CRC32 came in the aws-chunked trailer: it is kept as one in a header is.
const checkedStreamed = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "dir/streamed.bin",
                                                             ChecksumMode: "ENABLED" }));
check(md5(await body(checkedStreamed)) === md5(streamed) &&
      /^[A-Za-z0-9+/]{6}==$/.test(checkedStreamed.ChecksumCRC32 || ""),
      "GetObject of the streamed object with ChecksumMode: trailer's CRC32 " +
      checkedStreamed.ChecksumCRC32);
const headSum = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "dir/big.bin",
                                                      ChecksumMode: "ENABLED" }));
check(/-3$/.test(headSum.ChecksumCRC32 || "") && headSum.ChecksumType === "COMPOSITE",
      "HeadObject of the multipart object: composite CRC32 " + headSum.ChecksumCRC32);
const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "dir/big.bin" }));
check(head.ContentLength === big.length && head.ETag === done.ETag &&
      head.ContentType === "application/x-big", "HeadObject of the multipart object");

const deleted = await s3.send(new DeleteObjectsCommand({
  Bucket: bucket, Delete: { Objects: keys.map((Key) => ({ Key })) } }));
check((deleted.Deleted || []).length === 3 && !(deleted.Errors || []).length, "DeleteObjects");
await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
check(true, "DeleteBucket");
console.log("sdk-js: OK");
