"""Objects changed behind an s3:// mount: deleted (never read, fully cached, partly cached),
overwritten with another size (never read, partly cached), added (a file, a directory) — what a
reader sees before `epochctl refresh`, after it, and after a remount. test_s3_mount.py's refresh
test covers same-size overwrites and a delete after a refresh; this one the rest.

Under the prefix `chg/` of a fresh bucket: 240 objects of 2-60 KB and 40 of 200 KiB-2.5 MiB (several
FUSE reads of 128 KiB, several 1 MiB chunks). Mounted (--ram-cache 512M), everything read once
but the objects kept unread and the partly read ones (4 KiB of their second chunk only). Then,
with boto3:
deletes, size-changing overwrites, two additions. The page cache dropped, then:

  1. before the refresh: the namespace is the mount's: deleted and overwritten objects are still
     listed with their old sizes, added ones are not (listdir, stat: ENOENT);
     a deleted object never read: its read fails with ENOENT (rgw's 404); an overwritten one
     never read: EIO (the GET's If-Match: 412); a fully cached deleted one is served from the
     cache (its old bytes, no GET); a partly cached one (one chunk): that chunk's old bytes, and
     a whole read fails as an unread one does (ENOENT deleted, EIO overwritten);
  2. `epochctl refresh`: reports the removed, changed and added entries (no remount needed); with
     no page-cache drop (the refresh makes the kernel drop what it holds of them) the deleted ones
     are gone (listdir, stat, open: ENOENT), the overwritten ones have their new size and bytes,
     the added ones are listed and read boto3's bytes; `status` shows no pending additions; a
     second refresh finds nothing new and keeps the version;
  3. a remount: the tree is boto3's listing, the added objects' bytes boto3's.

Environment: EPOCHFS_RGW_DIR (the fixture), EPOCHFS_BIN_DIR (set by CTest). Root (drop_caches).
Exit 77 (skipped) without the fixture, boto3, /dev/fuse or an epochfs with --s3-endpoint.
"""

import errno
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import s3_mount_support as sup  # noqa: E402
from s3_mount_support import MiB  # noqa: E402

SEED = 20261205
PREFIX = "chg"
SMALL, MEDIUM = 240, 40
CHUNK = MiB
# A partly read object: 4 KiB inside its second chunk. A read that does not start in chunk 0
# (nor where the previous one ended) starts no read-ahead: that chunk alone is cached.
PARTIAL = (CHUNK + 4096, 4096)
DELETED_UNREAD = "s/000.bin"
DELETED_CACHED = ["s/001.bin", "m/00.bin"]
DELETED_PARTIAL = "m/01.bin"
OVERWRITTEN_UNREAD = "s/002.bin"
OVERWRITTEN_PARTIAL = "m/02.bin"
ADDED = ["s/zz-added.bin", "new/dir/added.bin"]
UNREAD = [DELETED_UNREAD, OVERWRITTEN_UNREAD]
PARTLY_READ = [DELETED_PARTIAL, OVERWRITTEN_PARTIAL]
DELETED = [DELETED_UNREAD] + DELETED_CACHED + [DELETED_PARTIAL]
OVERWRITTEN = [OVERWRITTEN_UNREAD, OVERWRITTEN_PARTIAL]


def body(rel, version=0):
    rng = random.Random("%d:%s:%d" % (SEED, rel, version))
    if rel.startswith("m/"):
        n = rng.randrange(200 * 1024, 5 * MiB // 2)
        if rel == OVERWRITTEN_PARTIAL or rel == DELETED_PARTIAL:
            n = max(n, 2 * MiB + 12345)  # three chunks at least
    else:
        n = rng.randrange(2000, 60000)
    if version:
        n += 777 * version  # another size: the listed size no longer holds
    return rng.randbytes(n)


def keys():
    return ["s/%03d.bin" % i for i in range(SMALL)] + ["m/%02d.bin" % i for i in range(MEDIUM)]


class S3Changes(sup.MountTest):
    @classmethod
    def setUpClass(cls):
        sup.scrub_environ()
        cls.fx = sup.Fixture()
        cls.s3 = cls.fx.client()
        cls.bucket = sup.unique_bucket("changes")
        cls.tmp = sup.make_tmp("changes")
        cls.mnt = os.path.join(cls.tmp, "mnt")
        cls.log = os.path.join(cls.tmp, "epochfs.log")
        os.makedirs(cls.mnt)
        cls.data = {rel: body(rel) for rel in keys()}
        cls.s3.create_bucket(Bucket=cls.bucket)
        sup.upload(cls.s3, cls.bucket, {cls.key(rel): d for rel, d in cls.data.items()})
        cls.env = sup.daemon_env(AWS_SHARED_CREDENTIALS_FILE=cls.fx.credentials_file,
                                 AWS_PROFILE=cls.fx.profile)
        cls.changed = False
        cls.refreshed = False
        try:
            cls.mount()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def key(cls, rel):
        return PREFIX + "/" + rel

    @classmethod
    def mount(cls):
        sup.mount("s3://%s/%s" % (cls.bucket, PREFIX), cls.mnt,
                  ["--ram-cache", "512M", "--s3-endpoint", cls.fx.endpoint,
                   "--s3-region", cls.fx.region, "--log-level", "info"],
                  cls.env, log_file=cls.log)

    @classmethod
    def tearDownClass(cls):
        cls.s3.close()
        cls.remove_mount()

    def listed(self, rel):
        try:
            return os.path.basename(rel) in os.listdir(os.path.dirname(self.path(rel)))
        except FileNotFoundError:
            return False

    def stat_errno(self, rel):
        try:
            os.stat(self.path(rel))
            return 0
        except OSError as e:
            return e.errno

    def outcome(self, rel, old, new=None, offset=0, size=-1):
        """'old', 'new', or the errno name of a read of `rel`; a read with any other bytes
        fails the test."""
        r = sup.read_child(self.path(rel), offset, size)
        if not r["ok"]:
            return r["errname"]
        end = None if size < 0 else offset + size
        got = (r["len"], r["sha256"])
        if got == sup.digest(old[offset:end]):
            return "old"
        if new is not None and got == sup.digest(new[offset:end]):
            return "new"
        self.fail_with_log("%s [%d, %s): %d bytes that are neither version" % (
            rel, offset, end, r["len"]))

    # ---- 1: read once, then change behind the mount: before the refresh --------------------
    def test_1_before_refresh(self):
        full = [rel for rel in sorted(self.data) if rel not in UNREAD + PARTLY_READ]
        got = sup.hash_in_subprocess([self.path(rel) for rel in full], timeout=300)
        wrong = [rel for rel in full if got[self.path(rel)] != sup.digest(self.data[rel])]
        if wrong:
            self.fail_with_log("first read: wrong bytes in %s" % wrong[:5])
        for rel in PARTLY_READ:
            self.assertEqual(self.outcome(rel, self.data[rel], None, *PARTIAL), "old")
        ls = json.loads(sup.epochctl(self.mnt, "ls", "--json", *PARTLY_READ).stdout)
        chunks = {e["path"]: (e["cached_chunks"], e["chunks"]) for e in ls["paths"]}
        print("the partly read ones, (cached chunks, chunks): %s" % chunks)
        for rel in PARTLY_READ:
            self.assertEqual(chunks[rel][0], 1, "%s: want one chunk cached" % rel)
            self.assertGreaterEqual(chunks[rel][1], 3, rel)

        self.new = {rel: body(rel, version=1) for rel in OVERWRITTEN + ADDED}
        for rel in DELETED:
            self.s3.delete_object(Bucket=self.bucket, Key=self.key(rel))
        for rel in OVERWRITTEN + ADDED:
            self.s3.put_object(Bucket=self.bucket, Key=self.key(rel), Body=self.new[rel])
        type(self).new = self.new
        type(self).changed = True
        sup.drop_caches(3)

        # The namespace is the mount's until a refresh.
        for rel in DELETED + OVERWRITTEN:
            self.assertTrue(self.listed(rel), "%s is no longer listed before a refresh" % rel)
            self.assertEqual(os.stat(self.path(rel)).st_size, len(self.data[rel]), rel)
        for rel in ADDED:
            self.assertFalse(self.listed(rel), "%s is listed before a refresh" % rel)
            self.assertEqual(self.stat_errno(rel), errno.ENOENT, rel)

        gets = self.fx.gets()
        seen = {rel: self.outcome(rel, self.data[rel]) for rel in DELETED_CACHED}
        cached_gets = self.fx.gets() - gets
        seen[DELETED_UNREAD] = self.outcome(DELETED_UNREAD, self.data[DELETED_UNREAD])
        seen[OVERWRITTEN_UNREAD] = self.outcome(OVERWRITTEN_UNREAD, self.data[OVERWRITTEN_UNREAD],
                                                self.new[OVERWRITTEN_UNREAD])
        for rel in PARTLY_READ:
            new = self.new.get(rel)
            seen[rel + " cached piece"] = self.outcome(rel, self.data[rel], new, *PARTIAL)
            seen[rel + " whole"] = self.outcome(rel, self.data[rel], new)
        print("before the refresh: %s; GETs for the cached ones: %d"
              % (json.dumps(seen, indent=1), cached_gets))
        want = {DELETED_UNREAD: {"ENOENT"}, OVERWRITTEN_UNREAD: {"EIO"}}
        want.update({rel: {"old"} for rel in DELETED_CACHED})
        want.update({rel + " cached piece": {"old"} for rel in PARTLY_READ})
        # Chunk 0 is not cached: its GET finds the object gone (404) or changed (If-Match: 412).
        want[DELETED_PARTIAL + " whole"] = {"ENOENT"}
        want[OVERWRITTEN_PARTIAL + " whole"] = {"EIO"}
        bad = {k: v for k, v in seen.items() if v not in want[k]}
        if bad:
            self.fail_with_log("before the refresh: %s (want %s)" % (bad, want))
        self.assertEqual(cached_gets, 0, "the cached deleted objects were fetched again")

    # ---- 2: the refresh applies deletes, overwrites and additions -------------------------
    def test_2_refresh(self):
        if not self.changed:
            self.skipTest("test_1 did not change the objects")
        r = json.loads(sup.epochctl(self.mnt, "refresh", "--json").stdout)
        print("refresh: %s" % json.dumps(r))
        # No drop_caches: the kernel listed s/ and holds pages of the partly read ones.
        self.assertEqual(r["removed"], len(DELETED), r)
        self.assertEqual(sorted(r["removed_paths"]), sorted(DELETED))
        self.assertEqual(r["changed"], len(OVERWRITTEN), r)
        self.assertEqual(sorted(r["changed_paths"]), sorted(OVERWRITTEN))
        # Entries: s/zz-added.bin; new, new/dir, new/dir/added.bin. Paths: the subtrees' tops.
        self.assertEqual(r["added"], 4, r)
        self.assertEqual(sorted(r["added_paths"]), ["new", "s/zz-added.bin"])
        self.assertFalse(r["remount_needed"])
        type(self).refreshed = True

        for rel in DELETED:
            self.assertFalse(self.listed(rel), "%s still listed after the refresh" % rel)
            self.assertEqual(self.stat_errno(rel), errno.ENOENT, rel)
            self.assertEqual(sup.read_child(self.path(rel))["errname"], "ENOENT", rel)
        for rel in OVERWRITTEN:
            self.assertEqual(os.stat(self.path(rel)).st_size, len(self.new[rel]), rel)
            self.assertEqual(self.outcome(rel, self.data[rel], self.new[rel]), "new", rel)
        for rel in ADDED:
            self.assertTrue(self.listed(rel), "%s not listed after the refresh" % rel)
            self.assertEqual(os.stat(self.path(rel)).st_size, len(self.new[rel]), rel)
            got = sup.read_child(self.path(rel))
            self.assertEqual((got.get("len"), got.get("sha256")), sup.digest(self.new[rel]), rel)
        st = sup.status(self.mnt)
        print("status.dataset: %s" % json.dumps(st.get("dataset")))
        self.assertEqual(st["dataset"]["pending_additions"], 0)
        self.assertEqual(st["dataset"]["files"], len(self.data) - len(DELETED) + len(ADDED))
        version = st["dataset"]["version"]
        again = json.loads(sup.epochctl(self.mnt, "refresh", "--json").stdout)
        self.assertEqual((again["added"], again["removed"], again["changed"]), (0, 0, 0), again)
        self.assertEqual(again["version"], version, "a refresh that found nothing new")

    # ---- 3: a remount shows the store as it is -------------------------------------------
    def test_3_remount(self):
        if not self.refreshed:
            self.skipTest("test_2 did not refresh")
        self.assertTrue(sup.unmount(self.mnt))
        self.mount()
        want = {rel: d for rel, d in self.data.items() if rel not in DELETED}
        want.update(self.new)
        tree = {}
        for d, _, names in os.walk(self.mnt):
            for n in names:
                p = os.path.join(d, n)
                tree[os.path.relpath(p, self.mnt)] = os.lstat(p).st_size
        self.assertEqual(tree, {rel: len(d) for rel, d in want.items()})
        for rel in ADDED + OVERWRITTEN:
            r = sup.read_child(self.path(rel))
            self.assertEqual((r.get("len"), r.get("sha256")), sup.digest(self.new[rel]), rel)


if __name__ == "__main__":
    sup.main(sup.skip_reason(root=True))
