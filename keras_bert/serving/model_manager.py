"""Which model versions are served: watches each model's base path, loads new version directories,
retires old ones by the version policy, and answers lookups and status as TF Serving's core does.

Availability comes first, as in TF Serving's AvailabilityPreservingPolicy: a version is retired
only once every version the policy wants is available, so a new version that fails to load (a
half-copied or corrupt directory) never takes down the one being served. A version that failed is
loaded again when its directory changes (the copy finished, a fixed export replaced it).

A base path that is missing, or holds no version, is reported once per model, and again only
when that changes; a missing base path changes nothing (TF Serving's FileSystemStoragePathSource
aspires nothing for it), and ``wait_for_models`` holds the start-up back until every model has
a version, as TF Serving's ServerCore does before its ports open."""

from __future__ import annotations

import dataclasses
import gc
import logging
import threading
import time
from typing import Callable

import grpc
from tensorflow_serving.apis import get_model_status_pb2

from keras_bert import fileio
from keras_bert.serving import config_files as config_lib
from keras_bert.serving.errors import (ServingError, failed_precondition, from_exception,
                                       invalid_argument, not_found, permission_denied)
from keras_bert.serving.base_paths import is_version_dir, list_versions
from keras_bert.serving.servable import Servable

logger = logging.getLogger(__name__)

State = get_model_status_pb2.ModelVersionStatus.State
# How long retiring a version waits for its in-flight requests before freeing its memory.
RETIRE_WAIT_S = 30.0
# A retired version's memory is freed once the versions replacing it have answered a request
# and no model call has run for RETIRE_QUIET_S since, or RETIRE_DEFER_MAX_S after it retired
# (unbroken traffic, or none): freeing a model (closing its session, collecting its graph) holds
# the CPU and the GIL, which the first requests to the new version would otherwise share
# (benchmarks/README.md, "Warm-up").
RETIRE_QUIET_S = 0.25
RETIRE_DEFER_MAX_S = 2.0
# How often the start-up wait looks whether every model has a version (it reads state; the
# poller thread is what looks at the file system).
STARTUP_CHECK_S = 0.05
LoadFn = Callable[[str, int, str], Servable]


@dataclasses.dataclass
class VersionState:
    state: int
    error_code: int = 0
    error_message: str = ""
    fingerprint: tuple | None = None  # of the directory that failed to load


def directory_fingerprint(path: str) -> tuple:
    """(relative path, size, mtime) of every file under ``path``: changes when a copy into it
    progresses or its files are replaced."""
    entries = []
    for root, _, files in fileio.walk(path):
        for name in files:
            full = f"{root.rstrip('/')}/{name}"
            try:
                stat = fileio.file_stat(full)
            except FileNotFoundError:
                continue  # removed while walking
            entries.append((full[len(path):], stat.length, stat.mtime_nsec))
    return tuple(sorted(entries))


def aspired_versions(model: config_lib.ModelConfig, versions: list[int]) -> list[int]:
    """The versions the model's policy wants served (default: the latest one)."""
    policy = model.model_version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        return versions
    if choice == "specific":
        wanted = set(policy.specific.versions)
        return [v for v in versions if v in wanted]
    count = policy.latest.num_versions if choice == "latest" else 1
    return versions[-max(count, 1):]


class ModelManager:
    """Serves the models of a ModelServerConfig and keeps them in step with their base paths.

    A SavedModel is a program, so a reload (``reload_config``, ModelService's
    HandleReloadConfigRequest) may only name base paths under the roots: the directories
    holding the base paths given at start, and those of the config file each time the server
    re-reads it (``reload_config(..., from_config_file=True)``).

    Args:
        config: a validated ModelServerConfig (model_config_list).
        load: builds a Servable from (name, version, path); it may raise.
        reload_any_path: let reloads name any base path (the models' code then comes from
            whoever can call the reload RPC).
    """

    def __init__(self, config: config_lib.ModelServerConfig, load: LoadFn,
                 reload_any_path: bool = False):
        self._load = load
        self._config = config
        self._roots = config_lib.model_roots(config)
        self._reload_any_path = reload_any_path
        self._lock = threading.Lock()
        self._poll_lock = threading.Lock()
        self._servables: dict[str, dict[int, Servable]] = {}
        self._states: dict[str, dict[int, VersionState]] = {}
        self._labels: dict[str, dict[str, int]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._poll_wait_s = 0.0
        # name -> what was last said about the model's base path ("" when it has versions).
        self._reported: dict[str, str] = {}
        self._reapers: list[threading.Thread] = []

    @property
    def roots(self) -> list[str]:
        """The directories a reload may take base paths from."""
        return sorted(self._roots)

    # ------------------------------------------------------------------------------- lifecycle
    def start(self, poll_wait_seconds: float) -> None:
        """Loads what the config asks for, then polls every ``poll_wait_seconds`` (> 0).
        ``wait_for_models`` then waits for the models still without a version and sets the
        version labels."""
        self._poll_wait_s = poll_wait_seconds
        self.poll()
        if poll_wait_seconds > 0:
            self._thread = threading.Thread(target=self._poll_loop, args=(poll_wait_seconds,),
                                            name="model-poller", daemon=True)
            self._thread.start()

    def wait_for_models(self, stop: threading.Event) -> bool:
        """Blocks until every configured model has an available version, then sets the version
        labels: TF Serving's ServerCore waits for the first load of each model the same way
        before its ports open, and its file-system source keeps looking for a base path that
        does not exist yet. One line says what is waited for; the poller says what it finds.

        Returns:
            True once every model serves; False if ``stop`` was set first.

        Raises:
            ServingError: a model's versions failed to load and none serves (TF Serving exits:
                "did not become available"), or a model has no version and polling is off
                (nothing would ever look again).
        """
        announced = False
        while True:
            waiting, failed = self._unavailable_models()
            if failed:
                raise ServingError(grpc.StatusCode.UNKNOWN, "; ".join(failed))
            if not waiting:
                self._update_labels(self._config)
                return True
            models = ("model " if len(waiting) == 1 else "models ") + ", ".join(waiting)
            if self._poll_wait_s <= 0:
                raise not_found(f"{models} {'has' if len(waiting) == 1 else 'have'} no "
                                "version, and --file_system_poll_wait_seconds 0 looks only "
                                "once, at start-up (TF Serving would wait forever)")
            if not announced:
                logger.info("not listening yet: waiting for a first version of %s (looking "
                            "every %g s); ready once every model serves one", models,
                            self._poll_wait_s)
                announced = True
            if stop.wait(STARTUP_CHECK_S):
                return False

    def _unavailable_models(self) -> tuple[list[str], list[str]]:
        """(names of the configured models with no available version and no failed load,
        "model m did not become available: ..." for those whose loads failed)."""
        waiting, failed = [], []
        with self._lock:
            for model in self._config.model_config_list.config:
                states = self._states.get(model.name, {})
                if any(s.state == State.AVAILABLE for s in states.values()):
                    continue
                errors = [f"version {version} failed to load: {s.error_message}"
                          for version, s in sorted(states.items())
                          if s.state == State.END and s.error_code]
                if errors:
                    failed.append(f"model {model.name} did not become available: "
                                  + "; ".join(errors))
                else:
                    waiting.append(model.name)
        return waiting, failed

    def stop(self) -> None:
        """Stops polling and closes every version (retired ones at once, without waiting for
        a quiet moment)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            servables = [s for versions in self._servables.values() for s in versions.values()]
            self._servables.clear()
            reapers, self._reapers = self._reapers, []
        for servable in servables:
            servable.close()
        for reaper in reapers:
            reaper.join()

    def _poll_loop(self, wait_s: float) -> None:
        while not self._stop.wait(wait_s):
            try:
                self.poll()
            except Exception:  # keep polling; one bad pass must not stop hot reload
                logger.exception("polling the model base paths failed")

    # ------------------------------------------------------------------------------- polling
    def poll(self) -> None:
        """One pass: load aspired versions first, then retire the rest (availability first)."""
        with self._poll_lock:
            models = {m.name: m for m in self._config.model_config_list.config}
            self._reported = {n: r for n, r in self._reported.items() if n in models}
            for model in models.values():
                if not fileio.isdir(model.base_path):
                    # As TF Serving: nothing is loaded or retired while the base path is
                    # missing (it may be a transient failure of a network file system).
                    self._report(model, self._missing_base_path(model), [])
                    continue
                versions = list_versions(model.base_path)
                aspired = aspired_versions(model, versions)
                self._report(model, "" if aspired else self._no_version(model, versions),
                             aspired)
                for version in aspired:
                    self._maybe_load(model, version)
                if all(self._is_available(model.name, v) for v in aspired):
                    self._retire(model.name, keep=set(aspired))
                else:  # keep serving what serves until the policy's versions are all up
                    self._retire(model.name, keep=set(aspired) | set(
                        self._servables.get(model.name, {})))
            for name in list(self._servables):
                if name not in models:
                    self._retire(name, keep=set())

    def _report(self, model, problem: str, aspired: list[int]) -> None:
        """Logs what is wrong with a model's base path, or that it is right again: once per
        change, not on every poll (TF Serving logs it on every poll)."""
        before = self._reported.get(model.name, "")
        self._reported[model.name] = problem
        if problem and problem != before:
            logger.warning("%s", problem)
        elif before and not problem:
            logger.info("model %s: found version(s) %s under base path %s", model.name,
                        ", ".join(map(str, aspired)), model.base_path)

    def _missing_base_path(self, model) -> str:
        what = "is not a directory" if fileio.exists(model.base_path) else "does not exist"
        loaded = sorted(self._servables.get(model.name, {}))
        return (f"model {model.name}: base path {model.base_path} {what}"
                + (f"; version(s) {', '.join(map(str, loaded))} keep serving" if loaded
                   else ""))

    def _no_version(self, model, versions: list[int]) -> str:
        base = model.base_path.rstrip("/")
        if versions:
            return (f"model {model.name}: none of the versions under base path {base} "
                    f"({', '.join(map(str, versions))}) is one its version policy names")
        if is_version_dir(base):
            return (f"model {model.name}: base path {base} is a SavedModel itself; a base "
                    "path holds versions, directories named by a number (give its parent, "
                    "and name the SavedModel's directory 1)")
        return (f"model {model.name}: no version under base path {base}; a version is a "
                f"directory named by a number holding a SavedModel ({base}/1/saved_model.pb)")

    def _is_available(self, name: str, version: int) -> bool:
        state = self._states.get(name, {}).get(version)
        return state is not None and state.state == State.AVAILABLE

    def _maybe_load(self, model, version: int) -> None:
        path = f"{model.base_path.rstrip('/')}/{version}"
        state = self._states.get(model.name, {}).get(version)
        if state is not None and state.state == State.AVAILABLE:
            return
        fingerprint = directory_fingerprint(path)
        if state is not None and state.state == State.END and state.error_code:
            if fingerprint == state.fingerprint:
                return  # failed, and nothing changed since: retried once the directory does
            logger.info("%s version %d changed since it failed to load; loading it again",
                        model.name, version)
        self._set_state(model.name, version, VersionState(State.LOADING))
        try:
            servable = self._load(model.name, version, path)
        except Exception as e:
            error = from_exception(e)
            logger.error("loading %s version %d from %s failed: %s", model.name, version, path,
                         error.message)
            self._set_state(model.name, version, VersionState(
                State.END, error.code_number, error.message, fingerprint))
            return
        with self._lock:
            self._servables.setdefault(model.name, {})[version] = servable
            self._states[model.name][version] = VersionState(State.AVAILABLE)
        logger.info("serving %s version %d", model.name, version)

    def _retire(self, name: str, keep: set[int]) -> None:
        with self._lock:
            loaded = self._servables.get(name, {})
            retiring = [loaded.pop(v) for v in sorted(loaded) if v not in keep]
            for servable in retiring:
                self._states[name][servable.version] = VersionState(State.UNLOADING)
        for servable in retiring:
            servable.unload()
            self._set_state(name, servable.version, VersionState(State.END))
            logger.info("retired %s version %d", name, servable.version)
        if retiring:
            with self._lock:
                successors = list(self._servables.get(name, {}).values())
            reaper = threading.Thread(target=self._free, args=(retiring, successors),
                                      daemon=True, name=f"retire-{name}")
            with self._lock:
                self._reapers = [r for r in self._reapers if r.is_alive()] + [reaper]
            reaper.start()

    def _quiet(self, successors: list[Servable]) -> bool:
        """Every successor has answered a request, and no model call of any serving version
        has run for RETIRE_QUIET_S."""
        if any(successor.activity()[0] == 0 for successor in successors):
            return False
        with self._lock:
            serving = [s for versions in self._servables.values() for s in versions.values()]
        return all(servable.activity()[1] >= RETIRE_QUIET_S for servable in serving)

    def _free(self, retired: list[Servable], successors: list[Servable]) -> None:
        """Gives the memory of retired versions back, on its own thread: once their
        ``successors`` (the versions of the model serving now) have answered a request and
        traffic pauses (at most RETIRE_DEFER_MAX_S from now), and their last requests are done.

        A loaded graph is a web of reference cycles (a tf.Graph and its operations), which
        only a full garbage collection frees; a server allocates few Python objects between
        version pushes, so that collection hardly ever comes on its own, and each load of
        MiniLM kept about 40 MB for good (issue 24: RSS 1.4 -> 2.4 GB over 24 loads).
        """
        deadline = time.monotonic() + RETIRE_DEFER_MAX_S
        while not self._quiet(successors) and time.monotonic() < deadline:
            if self._stop.wait(RETIRE_QUIET_S / 5):
                break
        for servable in retired:
            servable.close()
        for servable in retired:
            if not servable.wait_closed(RETIRE_WAIT_S):
                logger.warning("%s version %d still has requests in flight after %.0f s; its "
                               "memory is freed after a later retirement", servable.name,
                               servable.version, RETIRE_WAIT_S)
        start = time.monotonic()
        freed = gc.collect()
        logger.info("garbage-collected %d objects of retired versions in %.2f s", freed,
                    time.monotonic() - start)

    def _set_state(self, name: str, version: int, state: VersionState) -> None:
        with self._lock:
            self._states.setdefault(name, {})[version] = state

    # ------------------------------------------------------------------------------- config
    def reload_config(self, new_config: config_lib.ModelServerConfig,
                      from_config_file: bool = False) -> None:
        """Switches to ``new_config``: loads its models, retires the others (all of them when
        it lists none, as in TF Serving), then sets labels.

        Args:
            new_config: the models to serve.
            from_config_file: it was read from --model_config_file, which the operator
                controls: its base paths' directories become roots. Otherwise (the reload
                RPC) a base path outside the roots is PERMISSION_DENIED.
        """
        config_lib.validate(new_config)
        if from_config_file:
            self._roots |= config_lib.model_roots(new_config)
        elif not self._reload_any_path:
            outside = config_lib.paths_outside(new_config, self._roots)
            if outside:
                raise permission_denied(
                    f"base path {outside[0]} is outside the model roots given at start "
                    f"({', '.join(sorted(self._roots))}); a SavedModel is code, so reloads "
                    "may only name paths there (--unsafe_reload_any_path lifts this)")
        self._config = new_config
        self.poll()
        self._update_labels(new_config)

    def _update_labels(self, config: config_lib.ModelServerConfig) -> None:
        labels = {}
        for model in config.model_config_list.config:
            for label, version in model.version_labels.items():
                state = self._states.get(model.name, {}).get(version)
                if state is None or state.state != State.AVAILABLE:
                    raise failed_precondition(
                        f"Request to assign label to version {version} of model {model.name}, "
                        "which is not currently available for inference")
                labels.setdefault(model.name, {})[label] = version
        with self._lock:
            self._labels = labels

    # ------------------------------------------------------------------------------- lookups
    def resolve_version(self, model_spec) -> int | None:
        """The version a ModelSpec asks for (None: the latest), or INVALID_ARGUMENT."""
        if not model_spec.name:
            raise invalid_argument("ModelSpec has no name specified.")
        choice = model_spec.WhichOneof("version_choice")
        if choice == "version":
            return model_spec.version.value
        if choice == "version_label":
            version = self._labels.get(model_spec.name, {}).get(model_spec.version_label)
            if version is None:
                raise invalid_argument(
                    f"Unrecognized servable version label: {model_spec.version_label}")
            return version
        return None

    def servable(self, model_spec) -> Servable:
        """The loaded Servable for a ModelSpec, or NOT_FOUND as TF Serving answers."""
        version = self.resolve_version(model_spec)
        name = model_spec.name
        with self._lock:
            versions = self._servables.get(name, {})
            if version is None and versions:
                return versions[max(versions)]
            if version is not None and version in versions:
                return versions[version]
        request = f"Latest({name})" if version is None else f"Specific({name}, {version})"
        raise not_found(f"Servable not found for request: {request}")

    def version_states(self, model_spec) -> dict[int, VersionState]:
        """{version: state} for GetModelStatus: one version, or every version ever seen."""
        version = self.resolve_version(model_spec)
        with self._lock:
            states = dict(self._states.get(model_spec.name, {}))
        if version is not None:
            if version not in states:
                raise not_found(f"Could not find version {version} of model {model_spec.name}")
            return {version: states[version]}
        if not states:
            raise not_found(f"Could not find any versions of model {model_spec.name}")
        return states
