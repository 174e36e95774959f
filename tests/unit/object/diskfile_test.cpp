#include "object-server/diskfile.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include <doctest/doctest.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/crypto/md5.h"

namespace fs = std::filesystem;
using apus::common::Status;
using apus::common::Timestamp;
using apus::object::choose_files;
using apus::object::DiskFileManager;
using apus::object::DiskFileOptions;
using apus::object::DiskObject;
using apus::object::find_meta;
using apus::object::Location;
using apus::object::Metadata;
using apus::object::parse_file_name;

namespace {

Timestamp ts(const char* s) { return *Timestamp::parse(s); }

struct TempDevices {
  fs::path root;
  TempDevices() {
    root = fs::temp_directory_path() /
           ("apus-diskfile-" + std::to_string(::getpid()) + "-" + std::to_string(rand()));
    fs::create_directories(root / "sda1");
  }
  ~TempDevices() { fs::remove_all(root); }
  DiskFileOptions options() const {
    DiskFileOptions o;
    o.devices = root.string();
    o.mount_check = false;
    o.fallocate_reserve.amount = 0;
    return o;
  }
};

Location loc(std::string object = "o") {
  Location l;
  l.device = "sda1";
  l.partition = "7";
  l.account = "AUTH_test";
  l.container = "c";
  l.object = std::move(object);
  return l;
}

}  // namespace

TEST_CASE("diskfile: file names parse as Swift names them") {
  auto data = parse_file_name("1402464677.04188.data");
  REQUIRE(data);
  CHECK(data->kind == apus::object::OnDiskFile::Kind::kData);
  CHECK(data->timestamp == ts("1402464677.04188"));
  auto with_offset = parse_file_name("1402464677.04188_0000000000000001.ts");
  REQUIRE(with_offset);
  CHECK(with_offset->timestamp.offset() == 1);
  auto meta = parse_file_name("1402464677.04188+64.meta");
  REQUIRE(meta);
  REQUIRE(meta->ctype_timestamp);
  CHECK(meta->ctype_timestamp->raw() == ts("1402464677.04188").raw() + 100);
  CHECK_FALSE(parse_file_name(".1402464677.04188.data.Xy12Ab"));  // rsync temp file
  CHECK_FALSE(parse_file_name("hashes.pkl"));
}

TEST_CASE("diskfile: choose_files follows Swift's rules") {
  Timestamp now = ts("1400000010.00000");  // everything below is younger than reclaim_age
  SUBCASE("newest data wins; older data and not-newer meta/ts are obsolete") {
    auto c = choose_files({"1400000001.00000.data", "1400000002.00000.data",
                           "1400000002.00000.meta", "1400000003.00000.meta",
                           "1400000001.50000.ts"},
                          now, 604800);
    REQUIRE(c.data);
    CHECK(c.data->name == "1400000002.00000.data");
    REQUIRE(c.meta);
    CHECK(c.meta->name == "1400000003.00000.meta");
    CHECK_FALSE(c.tombstone);
    std::sort(c.obsolete.begin(), c.obsolete.end());
    CHECK(c.obsolete == std::vector<std::string>{"1400000001.00000.data", "1400000001.50000.ts",
                                                 "1400000002.00000.meta"});
  }
  SUBCASE("a newer tombstone deletes") {
    auto c = choose_files({"1400000001.00000.data", "1400000002.00000.ts"}, now, 604800);
    CHECK_FALSE(c.data);
    REQUIRE(c.tombstone);
    CHECK(c.obsolete == std::vector<std::string>{"1400000001.00000.data"});
  }
  SUBCASE("a lone old tombstone is reclaimable; a meta without data waits") {
    auto c = choose_files({"1000000000.00000.ts"}, now, 604800);
    REQUIRE(c.tombstone);
    CHECK(c.obsolete == std::vector<std::string>{"1000000000.00000.ts"});
    auto m = choose_files({"1400000009.00000.meta"}, now, 604800);
    CHECK(m.obsolete.empty());
    auto old = choose_files({"1300000000.00000.meta"}, now, 604800);
    CHECK(old.obsolete == std::vector<std::string>{"1300000000.00000.meta"});
  }
  SUBCASE("an older meta with a newer content-type is kept beside the newest meta") {
    // .meta at t3 (no ctype change), older .meta at t2 that set content-type at t2.
    auto c = choose_files({"1400000001.00000.data", "1400000003.00000.meta",
                           "1400000002.00000+0.meta"},
                          now, 604800);
    REQUIRE(c.meta);
    CHECK(c.meta->name == "1400000003.00000.meta");
    REQUIRE(c.ctype_meta);
    CHECK(c.ctype_meta->name == "1400000002.00000+0.meta");
    CHECK(c.obsolete.empty());
  }
  SUBCASE("unexpected files are left alone") {
    auto c = choose_files({"junk", "1400000001.00000.data"}, now, 604800);
    CHECK(c.obsolete.empty());
  }
}

// Timestamps a few seconds old: tombstones older than reclaim_age are removed on sight.
Timestamp recent(int seconds_ago) {
  return *Timestamp::from_seconds(static_cast<double>(Timestamp::now().ceil() - seconds_ago));
}

TEST_CASE("diskfile: write, open, meta, tombstone round trip") {
  TempDevices dev;
  DiskFileManager mgr(apus::common::io::default_fs(), dev.options(), {"prefix", "suffix"});
  Location l = loc("photos/cat.jpg");
  auto hash = mgr.object_hash(l);
  REQUIRE(hash.ok());

  auto missing = mgr.open(l);
  REQUIRE(missing.ok());
  CHECK(missing->state == DiskObject::State::kMissing);

  auto writer = mgr.create_writer(l, 11);
  REQUIRE(writer.ok());
  REQUIRE((*writer)->write("hello ").ok());
  REQUIRE((*writer)->write("world").ok());
  Timestamp t1 = recent(30);
  Metadata md = {{"X-Timestamp", t1.internal()}, {"Content-Type", "text/plain"},
                 {"Content-Length", "11"}, {"ETag", "5eb63bbbe01eeed093cb22bb8f5acdc3"},
                 {"X-Object-Meta-Color", "blue"}, {"name", l.name()}};
  REQUIRE((*writer)->commit(md, t1).ok());
  writer->reset();

  std::string dir = mgr.hash_dir(l, *hash);
  CHECK(fs::exists(dir + "/" + t1.internal() + ".data"));
  CHECK(fs::exists(mgr.partition_dir(l) + "/hashes.invalid"));
  CHECK(fs::is_empty(dev.root / "sda1" / "tmp"));  // the temp file was renamed away

  auto obj = mgr.open(l);
  REQUIRE(obj.ok());
  REQUIRE(obj->state == DiskObject::State::kExists);
  CHECK(obj->size == 11);
  CHECK(*find_meta(obj->metadata, "X-Object-Meta-Color") == "blue");
  char buf[32];
  auto n = mgr.read(*obj, 6, std::span(buf, sizeof buf));
  REQUIRE(n.ok());
  CHECK(std::string(buf, *n) == "world");

  // A POST: new user metadata replaces the old; data-only keys stay.
  Timestamp t2 = recent(20);
  REQUIRE(mgr.write_meta(l, {{"X-Timestamp", t2.internal()}, {"X-Object-Meta-Size", "big"},
                             {"name", l.name()}},
                         t2, std::nullopt)
              .ok());
  obj = mgr.open(l);
  REQUIRE(obj.ok());
  CHECK(obj->timestamp == t2);
  CHECK(obj->data_timestamp == t1);
  CHECK(find_meta(obj->metadata, "X-Object-Meta-Color") == nullptr);
  CHECK(*find_meta(obj->metadata, "X-Object-Meta-Size") == "big");
  CHECK(*find_meta(obj->metadata, "ETag") == "5eb63bbbe01eeed093cb22bb8f5acdc3");
  CHECK(*find_meta(obj->metadata, "Content-Type") == "text/plain");

  // A DELETE: the tombstone makes the data and meta obsolete, and they are removed.
  Timestamp t3 = recent(10);
  REQUIRE(mgr.write_tombstone(l, t3).ok());
  obj = mgr.open(l);
  REQUIRE(obj.ok());
  CHECK(obj->state == DiskObject::State::kDeleted);
  CHECK(obj->timestamp == t3);
  std::vector<std::string> left;
  for (auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename());
  CHECK(left == std::vector<std::string>{t3.internal() + ".ts"});
}

TEST_CASE("diskfile: a suffix marked dirty in a partition not yet on disk makes the partition") {
  // (After a write the partition is there and its lock file is opened without a stat; a
  // REPLICATE may name suffixes of a partition this disk has never held.)
  TempDevices dev;
  DiskFileManager mgr(apus::common::io::default_fs(), dev.options(), {"prefix", "suffix"});
  Location l = loc();
  REQUIRE(!fs::exists(mgr.partition_dir(l)));
  REQUIRE(mgr.mark_suffix_dirty(l, "abc").ok());
  std::ifstream in(mgr.partition_dir(l) + "/hashes.invalid");
  std::string line;
  REQUIRE(std::getline(in, line));
  CHECK(line == "abc");
  REQUIRE(mgr.mark_suffix_dirty(l, "def").ok());  // the partition there now
  REQUIRE(std::getline(in, line));
  CHECK(line == "def");
}

TEST_CASE("diskfile: data stored under another name is a collision, not a disk failure") {
  TempDevices dev;
  DiskFileManager mgr(apus::common::io::default_fs(), dev.options(), {"prefix", "suffix"});
  Location l = loc("o");
  auto writer = mgr.create_writer(l, 1);
  REQUIRE(writer.ok());
  REQUIRE((*writer)->write("x").ok());
  Timestamp t1 = recent(30);
  REQUIRE((*writer)->commit({{"X-Timestamp", t1.internal()}, {"Content-Length", "1"},
                             {"ETag", "9dd4e461268c8034f5c8564e155c67a6"}, {"name", l.name()}},
                            t1)
              .ok());
  writer->reset();
  // o2's hash directory gets o's data, as two names hashing the same would leave it.
  Location other = loc("o2");
  auto hash = mgr.object_hash(l);
  auto other_hash = mgr.object_hash(other);
  REQUIRE(hash.ok());
  REQUIRE(other_hash.ok());
  fs::path other_dir = mgr.hash_dir(other, *other_hash);
  fs::create_directories(other_dir.parent_path());
  fs::rename(mgr.hash_dir(l, *hash), other_dir);

  auto obj = mgr.open(other);
  REQUIRE(obj.ok());  // the disk is fine: what it holds is another object's
  CHECK(obj->state == DiskObject::State::kCollision);
  CHECK(obj->metadata.empty());
  CHECK(!obj->data_file.is_open());
  CHECK(fs::exists(other_dir / (t1.internal() + ".data")));  // left alone, not quarantined
}

TEST_CASE("diskfile: a failed upload leaves nothing behind, disk full is 507-worthy") {
  TempDevices dev;
  apus::common::io::FaultInjectingFs faulty(apus::common::io::default_fs());
  DiskFileManager mgr(faulty, dev.options(), {"prefix", "suffix"});
  Location l = loc();
  SUBCASE("unnamed temp file") {}
  SUBCASE("named temp file (no O_TMPFILE)") {
    faulty.fail_next(apus::common::io::FaultInjectingFs::Op::kCreateUnnamed, EOPNOTSUPP);
  }
  faulty.fail_writes_after_bytes(5);
  auto writer = mgr.create_writer(l, std::nullopt);
  REQUIRE(writer.ok());
  auto s = (*writer)->write("0123456789");
  CHECK(s.code() == apus::common::Status::Code::kInsufficientStorage);
  writer->reset();  // abandon: the temp file goes
  CHECK(fs::is_empty(dev.root / "sda1" / "tmp"));
  auto obj = mgr.open(l);
  REQUIRE(obj.ok());
  CHECK(obj->state == DiskObject::State::kMissing);
}

TEST_CASE("diskfile: a write's temp file has a name only where the filesystem has no O_TMPFILE") {
  TempDevices dev;
  apus::common::io::FaultInjectingFs faulty(apus::common::io::default_fs());
  DiskFileManager mgr(faulty, dev.options(), {"prefix", "suffix"});
  Location l = loc();
  const fs::path tmp = dev.root / "sda1" / "tmp";
  auto upload = [&](const std::string& body) {
    auto writer = mgr.create_writer(l, body.size());
    REQUIRE(writer.ok());
    REQUIRE((*writer)->write(body).ok());
    return std::move(*writer);
  };
  auto committed_body = [&] {
    auto obj = mgr.open(l);
    REQUIRE(obj.ok());
    REQUIRE(obj->state == DiskObject::State::kExists);
    std::string got(64, '\0');
    auto n = mgr.read(*obj, 0, got);
    REQUIRE(n.ok());
    got.resize(*n);
    return got;
  };
  Timestamp t = Timestamp::now();

  SUBCASE("unnamed: nothing in tmp/ while the body is written, named once committed") {
    auto writer = upload("abc");
    CHECK(fs::is_empty(tmp));  // a crash now would leave nothing
    REQUIRE(writer
                ->commit(
                    {{"X-Timestamp", t.internal()}, {"name", l.name()}, {"Content-Length", "3"}}, t)
                .ok());
    CHECK(committed_body() == "abc");
    CHECK(faulty.count(apus::common::io::FaultInjectingFs::Op::kLinkFile) == 1);
    CHECK(faulty.count(apus::common::io::FaultInjectingFs::Op::kRename) == 0);
  }
  SUBCASE("unnamed: a file of the same name is replaced at once, through tmp/") {
    // Two writes of one timestamp (a client's X-Timestamp sent twice): the last to commit wins,
    // as with rename, though linkat itself never replaces.
    auto first = upload("one");
    auto second = upload("two");
    Metadata md{{"X-Timestamp", t.internal()}, {"name", l.name()}, {"Content-Length", "3"}};
    REQUIRE(first->commit(md, t).ok());
    Status s = second->commit(md, t);
    REQUIRE_MESSAGE(s.ok(), s.to_string());
    CHECK(committed_body() == "two");
    CHECK(fs::is_empty(tmp));  // the placeholder and the file's own name in tmp/ are gone
  }
  SUBCASE("named: mkstemp in tmp/, for good once a filesystem refused O_TMPFILE") {
    faulty.fail_next(apus::common::io::FaultInjectingFs::Op::kCreateUnnamed, EOPNOTSUPP);
    auto writer = upload("abc");
    CHECK(std::distance(fs::directory_iterator(tmp), fs::directory_iterator()) == 1);
    auto later = upload("abd");  // the manager does not ask again
    CHECK(std::distance(fs::directory_iterator(tmp), fs::directory_iterator()) == 2);
    CHECK(faulty.count(apus::common::io::FaultInjectingFs::Op::kCreateUnnamed) == 1);
    REQUIRE(writer
                ->commit(
                    {{"X-Timestamp", t.internal()}, {"name", l.name()}, {"Content-Length", "3"}}, t)
                .ok());
    CHECK(committed_body() == "abc");
    later.reset();  // abandoned: its named temp file goes too
    CHECK(fs::is_empty(tmp));
  }
}

TEST_CASE("diskfile: remove_stale_temps removes what is older than reclaim_age in tmp/ only") {
  TempDevices dev;
  DiskFileManager mgr(apus::common::io::default_fs(), dev.options(), {"prefix", "suffix"});
  CHECK(mgr.remove_stale_temps("sda1", 0) == 0);  // no tmp/ yet
  const fs::path tmp = dev.root / "sda1" / "tmp";
  fs::create_directories(tmp / "a-directory");
  for (const char* name : {"tmpOLD111", "tmpNEW111", "tmpOLD222.new"})
    std::ofstream(tmp / name) << "x";
  const auto eight_days = std::chrono::hours(24 * 8);
  for (const char* name : {"tmpOLD111", "tmpOLD222.new", "a-directory"}) {
    fs::last_write_time(tmp / name, fs::file_time_type::clock::now() - eight_days);
  }
  CHECK(mgr.remove_stale_temps("sda1", 0) == 2);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(tmp)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"a-directory", "tmpNEW111"});
  CHECK(mgr.remove_stale_temps("sda1", 1) == 0);  // another policy's tmp-1/, missing
}

TEST_CASE("diskfile: corrupt metadata quarantines the object") {
  TempDevices dev;
  DiskFileManager mgr(apus::common::io::default_fs(), dev.options(), {"prefix", "suffix"});
  Location l = loc();
  auto writer = mgr.create_writer(l, 3);
  REQUIRE((*writer)->write("abc").ok());
  Timestamp t1 = ts("1400000001.00000");
  REQUIRE((*writer)
              ->commit({{"X-Timestamp", t1.internal()}, {"Content-Length", "4"},  // wrong size
                        {"ETag", "x"}, {"Content-Type", "a/b"}, {"name", l.name()}},
                       t1)
              .ok());
  auto obj = mgr.open(l);
  REQUIRE(obj.ok());
  CHECK(obj->state == DiskObject::State::kMissing);
  auto hash = *mgr.object_hash(l);
  CHECK(fs::exists(dev.root / "sda1" / "quarantined" / "objects" / hash));
  CHECK_FALSE(fs::exists(mgr.hash_dir(l, hash)));
}

TEST_CASE("diskfile: EIO on fsync fails the commit and leaves the old object visible") {
  TempDevices dev;
  apus::common::io::FaultInjectingFs faulty(apus::common::io::default_fs());
  DiskFileManager mgr(faulty, dev.options(), {"prefix", "suffix"});
  Location l = loc();
  Timestamp t1 = recent(20), t2 = recent(10);
  auto put = [&](const Timestamp& t, std::string_view body) {
    auto writer = mgr.create_writer(l, body.size());
    REQUIRE(writer.ok());
    REQUIRE((*writer)->write(body).ok());
    return (*writer)->commit({{"X-Timestamp", t.internal()}, {"Content-Length",
                              std::to_string(body.size())}, {"ETag", "e"},
                              {"Content-Type", "a/b"}, {"name", l.name()}},
                             t);
  };
  REQUIRE(put(t1, "old").ok());
  faulty.fail_next(apus::common::io::FaultInjectingFs::Op::kFsync, EIO);
  auto s = put(t2, "new!");
  CHECK(s.code() == apus::common::Status::Code::kIOError);
  auto obj = mgr.open(l);
  REQUIRE(obj.ok());
  REQUIRE(obj->state == DiskObject::State::kExists);
  CHECK(obj->data_timestamp == t1);
  CHECK(obj->size == 3);
  CHECK(fs::is_empty(dev.root / "sda1" / "tmp"));
}

TEST_CASE("diskfile: a large body's writeback starts every MiB, before the commit's fsync") {
  using Op = apus::common::io::FaultInjectingFs::Op;
  TempDevices dev;
  apus::common::io::FaultInjectingFs faulty(apus::common::io::default_fs());
  DiskFileOptions options = dev.options();
  uint64_t writebacks = 0, syncs = 0;
  SUBCASE("fsync_on_close: one writeback per MiB written") { writebacks = 3; }
  SUBCASE("mb_per_sync: its fdatasync replaces the writeback") {
    options.mb_per_sync = 1;
    syncs = 3;
  }
  SUBCASE("no fsync_on_close: the kernel writes back when it likes") {
    options.fsync_on_close = false;
  }
  SUBCASE("a failed writeback fails nothing (it is advice)") {
    faulty.fail_next(Op::kStartWriteback, EIO, 3);
    writebacks = 3;
  }
  DiskFileManager mgr(faulty, options, {"prefix", "suffix"});
  Location l = loc();
  std::string body;
  for (int i = 0; body.size() < (7u << 19); ++i) body += std::to_string(i) + ",";  // 3.5 MiB
  auto writer = mgr.create_writer(l, body.size());
  REQUIRE(writer.ok());
  for (size_t at = 0; at < body.size(); at += 64 << 10) {
    REQUIRE((*writer)->write(std::string_view(body).substr(at, 64 << 10)).ok());
  }
  CHECK(faulty.count(Op::kStartWriteback) == writebacks);
  CHECK(faulty.count(Op::kFdatasync) == syncs);
  Timestamp t = recent(5);
  REQUIRE((*writer)
              ->commit({{"X-Timestamp", t.internal()},
                        {"Content-Length", std::to_string(body.size())},
                        {"ETag", apus::common::crypto::md5_hex(body)},
                        {"Content-Type", "a/b"},
                        {"name", l.name()}},
                       t)
              .ok());
  auto obj = mgr.open(l);
  REQUIRE(obj.ok());
  REQUIRE(obj->state == DiskObject::State::kExists);
  std::string stored(body.size() + 1, '\0');
  auto n = faulty.pread(obj->data_file, 0, stored);
  REQUIRE(n.ok());
  stored.resize(*n);
  CHECK(stored == body);
}

TEST_CASE("diskfile: metadata too large for xattrs goes to a sidecar and reads back") {
  TempDevices dev;
  apus::common::io::FaultInjectingFs faulty(apus::common::io::default_fs());
  DiskFileManager mgr(faulty, dev.options(), {"prefix", "suffix"});
  Location l = loc("big-meta");
  Timestamp t1 = recent(20);
  Metadata md = {{"X-Timestamp", t1.internal()}, {"Content-Length", "2"}, {"ETag", "e"},
                 {"Content-Type", "a/b"}, {"name", l.name()}};
  for (int i = 0; i < 30; ++i) {
    md.emplace_back("X-Object-Meta-K" + std::to_string(i), std::string(120, 'v'));
  }
  auto writer = mgr.create_writer(l, 2);
  REQUIRE(writer.ok());
  REQUIRE((*writer)->write("hi").ok());
  // As ext4 answers when an inode's xattrs outgrow their block (whatever this filesystem is).
  faulty.fail_next(apus::common::io::FaultInjectingFs::Op::kSetXattr, ENOSPC);
  REQUIRE((*writer)->commit(md, t1).ok());
  writer->reset();
  std::string dir = mgr.hash_dir(l, *mgr.object_hash(l));
  CHECK(fs::exists(dir + "/." + t1.internal() + ".data.metadata"));
  auto obj = mgr.open(l);
  REQUIRE(obj.ok());
  REQUIRE(obj->state == DiskObject::State::kExists);
  CHECK(*find_meta(obj->metadata, "X-Object-Meta-K29") == std::string(120, 'v'));
  CHECK(fs::is_empty(dev.root / "sda1" / "tmp"));

  // A newer object replaces it: the old .data and its sidecar both go.
  Timestamp t2 = recent(10);
  REQUIRE(mgr.write_tombstone(l, t2).ok());
  std::vector<std::string> left;
  for (auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename());
  CHECK(left == std::vector<std::string>{t2.internal() + ".ts"});
}

namespace {

std::string get_xattr(const std::string& path, const char* name) {
  std::string v(65536, '\0');
  ssize_t n = ::getxattr(path.c_str(), name, v.data(), v.size());
  REQUIRE(n >= 0);
  v.resize(static_cast<size_t>(n));
  return v;
}

void set_xattr(const std::string& path, const std::string& name, std::string_view value) {
  REQUIRE(::setxattr(path.c_str(), name.c_str(), value.data(), value.size(), 0) == 0);
}

}  // namespace

TEST_CASE("diskfile: metadata split over several xattrs reads as Swift reads it") {
  TempDevices dev;
  DiskFileManager mgr(apus::common::io::default_fs(), dev.options(), {"prefix", "suffix"});
  auto store = [&](const std::string& name, Timestamp t) {
    auto writer = mgr.create_writer(loc(name), 2);
    REQUIRE(writer.ok());
    REQUIRE((*writer)->write("hi").ok());
    REQUIRE((*writer)
                ->commit({{"X-Timestamp", t.internal()}, {"Content-Length", "2"},
                          {"ETag", "49f68a5c8493ec2c0bf489821c21fc3b"}, {"Content-Type", "a/b"},
                          {"X-Object-Meta-Color", "blue"}, {"name", loc(name).name()}},
                         t)
                .ok());
    return mgr.hash_dir(loc(name), *mgr.object_hash(loc(name))) + "/" + t.internal() + ".data";
  };
  auto color = [&](const std::string& name) -> std::string {
    auto obj = mgr.open(loc(name));
    REQUIRE(obj.ok());
    if (obj->state != DiskObject::State::kExists) return "(gone)";
    const std::string* v = find_meta(obj->metadata, "X-Object-Meta-Color");
    return v ? *v : "(none)";
  };
  const Timestamp t = recent(10);

  // As an old Swift wrote it (xattr_size 254, here 40): pieces joined in key order.
  std::string split = store("split", t);
  const std::string pickle = get_xattr(split, "user.swift.metadata");
  REQUIRE(pickle.size() > 80);
  set_xattr(split, "user.swift.metadata", pickle.substr(0, 40));
  set_xattr(split, "user.swift.metadata1", pickle.substr(40, 40));
  set_xattr(split, "user.swift.metadata2", pickle.substr(80));
  CHECK(color("split") == "blue");

  // A whole pickle followed by a piece its checksum covers: every piece is read, as Swift
  // does (whose loads() stops at the pickle's end).
  std::string trailed = store("trailed", t);
  set_xattr(trailed, "user.swift.metadata1", "trailing bytes");
  set_xattr(trailed, "user.swift.metadata_checksum",
            apus::common::crypto::md5_hex(get_xattr(trailed, "user.swift.metadata") + "trailing bytes"));
  CHECK(color("trailed") == "blue");

  // A checksum that matches neither the first piece nor all of them: quarantined.
  std::string bad = store("bad", t);
  set_xattr(bad, "user.swift.metadata_checksum", std::string(32, '0'));
  CHECK(color("bad") == "(gone)");
  CHECK(fs::exists(dev.root / "sda1" / "quarantined" / "objects" / *mgr.object_hash(loc("bad"))));
}

TEST_CASE("diskfile: an orphan sidecar is kept while young and removed when old") {
  TempDevices dev;
  DiskFileManager mgr(apus::common::io::default_fs(), dev.options(), {"prefix", "suffix"});
  Location l = loc("orphans");
  std::string dir = mgr.hash_dir(l, *mgr.object_hash(l));
  fs::create_directories(dir);
  Timestamp young = recent(5), old = recent(7200);
  for (const Timestamp& t : {young, old}) {
    std::ofstream(dir + "/." + t.internal() + ".data.metadata") << "x";
  }
  // Any write in the hash dir runs the cleanup.
  REQUIRE(mgr.write_tombstone(l, recent(1)).ok());
  CHECK(fs::exists(dir + "/." + young.internal() + ".data.metadata"));
  CHECK_FALSE(fs::exists(dir + "/." + old.internal() + ".data.metadata"));
}

TEST_CASE("diskfile: a write after an open that found the directory renames into it at once") {
  TempDevices dev;
  DiskFileManager mgr(apus::common::io::default_fs(), dev.options(), {"prefix", "suffix"});
  Location l = loc("seen");
  std::string dir = mgr.hash_dir(l, *mgr.object_hash(l));
  auto names_in_dir = [&] {
    std::vector<std::string> names;
    for (auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  };
  auto put = [&](const Timestamp& t, bool dir_seen) {
    auto writer = mgr.create_writer(l, 1, dir_seen);
    REQUIRE(writer.ok());
    REQUIRE((*writer)->write("x").ok());
    Metadata md = {{"X-Timestamp", t.internal()}, {"Content-Length", "1"}, {"name", l.name()}};
    REQUIRE((*writer)->commit(md, t).ok());
  };
  Timestamp t1 = recent(40), t2 = recent(30), t3 = recent(20), t4 = recent(10);
  CHECK_FALSE(mgr.open(l)->dir_seen);
  put(t1, false);

  SUBCASE("of two racing writes, the one that commits last removes the older file, its own too") {
    auto opened = mgr.open(l);
    REQUIRE(opened.ok());
    REQUIRE(opened->dir_seen);
    // A newer write of another request commits between this one's open and its commit.
    put(t3, true);
    put(t2, opened->dir_seen);
    CHECK(names_in_dir() == std::vector<std::string>{t3.internal() + ".data"});
    REQUIRE(mgr.write_tombstone(l, t4, {}, mgr.open(l)->dir_seen).ok());
    CHECK(names_in_dir() == std::vector<std::string>{t4.internal() + ".ts"});
  }
  SUBCASE("a hash directory removed since the open is made again") {
    auto opened = mgr.open(l);
    REQUIRE(opened.ok());
    fs::remove_all(dir);
    put(t3, opened->dir_seen);
    CHECK(names_in_dir() == std::vector<std::string>{t3.internal() + ".data"});
  }
}

TEST_CASE("diskfile: get_hashes makes a missing partition only when its name is a partition") {
  TempDevices dev;
  DiskFileManager mgr(apus::common::io::default_fs(), dev.options(), {"prefix", "suffix"});
  Location part = loc();
  part.partition = "42";
  auto made = mgr.get_hashes(part, {});
  REQUIRE(made.ok());
  CHECK(made->suffixes.empty());
  CHECK(fs::exists(dev.root / "sda1" / "objects" / "42" / "hashes.pkl"));
  for (const char* name : {"abc", "-1", "4294967296"}) {
    part.partition = name;
    auto none = mgr.get_hashes(part, {});
    REQUIRE(none.ok());
    CHECK(none->suffixes.empty());
    CHECK_FALSE(fs::exists(dev.root / "sda1" / "objects" / name));
  }
}

TEST_CASE("diskfile: the stored CRC32C counts only with the ETag it was stored with") {
  const std::string etag = "5eb63bbbe01eeed093cb22bb8f5acdc3";
  Metadata md = {{"ETag", etag}};
  CHECK_FALSE(apus::object::stored_crc32c_for(md, etag));  // a body Swift wrote: none
  apus::object::set_meta(md, apus::object::kCrc32cMetaKey,
                         apus::object::stored_crc32c("c99465aa", etag));
  CHECK(*find_meta(md, "X-Apus-Crc32C") == "c99465aa " + etag);
  CHECK(apus::object::stored_crc32c_for(md, etag) == 0xc99465aau);
  // The ETag changed on disk since: the MD5 decides, as Swift's reader.
  CHECK_FALSE(apus::object::stored_crc32c_for(md, "d41d8cd98f00b204e9800998ecf8427e"));
  for (const char* bad : {"", "c99465aa", "c99465aa-", "c99465a  5eb63bbbe01eeed093cb22bb8f5acdc3",
                          "c99465ag 5eb63bbbe01eeed093cb22bb8f5acdc3"}) {
    apus::object::set_meta(md, apus::object::kCrc32cMetaKey, bad);
    CHECK_FALSE(apus::object::stored_crc32c_for(md, etag));
  }
}
