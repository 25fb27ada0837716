"""The cluster lab's state file (DIR/state.json): what `up` made, so that `down` can remove
exactly that, also after `up` or the daemons were killed.

Every resource is recorded *before* it is made (an intent), so a crash between the two leaves
an entry whose removal finds nothing, never a thing without an entry. The file is rewritten
atomically (write a temporary file, rename). Standard library only.
"""

import json
import os
import time

from .util import LabError

STATE_NAME = "state.json"
VERSION = 1


class LabState:
    """The JSON document of one lab: its prefix, resources (in creation order), nodes and
    source. Not thread-safe; one owner at a time."""

    def __init__(self, directory, doc):
        self.dir = directory
        self.doc = doc

    @property
    def path(self):
        return os.path.join(self.dir, STATE_NAME)

    @classmethod
    def create(cls, directory, prefix):
        doc = {"version": VERSION, "prefix": prefix, "dir": directory, "created": time.time(),
               "complete": False, "resources": [], "nodes": [], "source": None, "config": {}}
        state = cls(directory, doc)
        state.save()
        return state

    @classmethod
    def load(cls, directory):
        """The lab in `directory`, or None when there is none."""
        path = os.path.join(directory, STATE_NAME)
        try:
            with open(path) as f:
                doc = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise LabError("cannot read the lab's state file %s: %s" % (path, e)) from None
        if not isinstance(doc, dict) or doc.get("version") != VERSION or "prefix" not in doc:
            raise LabError("%s is not a cluster-lab state file of version %d" % (path, VERSION))
        return cls(directory, doc)

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    @property
    def prefix(self):
        return self.doc["prefix"]

    def record(self, kind, **fields):
        """Notes a resource about to be made; returns its entry (fields may be added later
        with update())."""
        entry = dict(kind=kind, **fields)
        self.doc["resources"].append(entry)
        self.save()
        return entry

    def update(self, entry, **fields):
        entry.update(fields)
        self.save()

    def resources(self, kind=None):
        return [r for r in self.doc["resources"] if kind is None or r["kind"] == kind]

    def remove_file(self):
        for p in (self.path, self.path + ".tmp"):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
