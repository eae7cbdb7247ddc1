"""Runs a function right after a module is imported, whoever imports it.

Python has no post-import event: a finder first on sys.meta_path answers for
the watched names only, finds the real module spec through the other finders
and hands the import a loader that runs the real one, then the function.
Every other import passes through at the cost of one set lookup.
"""

import importlib.abc
import importlib.util
import sys


class _LoaderThenCall(importlib.abc.Loader):
    def __init__(self, loader, callbacks):
        self._loader = loader
        self._callbacks = callbacks

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        # The module keeps its own loader: nothing after the import sees this one.
        module.__loader__ = self._loader
        module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        for callback in self._callbacks:
            callback(module)

    def __getattr__(self, name):  # is_package, get_code, get_resource_reader...
        return getattr(self._loader, name)


class _Watcher(importlib.abc.MetaPathFinder):
    def __init__(self):
        self.callbacks = {}
        self._finding = set()

    def find_spec(self, name, path, target=None):
        if name not in self.callbacks or name in self._finding:
            return None
        self._finding.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._finding.discard(name)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _LoaderThenCall(spec.loader, self.callbacks.pop(name))
        if not self.callbacks:  # nothing left to watch: every later import goes by as bare
            sys.meta_path.remove(self)
        return spec


_watcher = _Watcher()


def when_imported(name, callback):
    """callback(module) once `name` is imported: now, if it already is."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    _watcher.callbacks.setdefault(name, []).append(callback)
    if _watcher not in sys.meta_path:
        sys.meta_path.insert(0, _watcher)
