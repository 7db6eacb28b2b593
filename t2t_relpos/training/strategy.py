"""tf.distribute strategies by name, and splitting a CPU into logical devices for testing multi-device paths."""

import json
import os

import tensorflow as tf

from t2t_relpos import errors

DISTRIBUTIONS = ("auto", "one_device", "mirrored", "multi_worker")
# How long a worker waits for the others when its process exits (TensorFlow's shutdown barrier).
SHUTDOWN_BARRIER_SECONDS = 60
# How long a finished worker waits for the others at the end of a run (`leave_together`): long enough for the
# chief's export of a large model. A worker that died is noticed sooner, by its missing heartbeats.
END_OF_RUN_SECONDS = 3600
# How long a worker may go without a heartbeat before the coordination service declares it dead and aborts
# every collective of the run. TensorFlow's default, 10 s, was exceeded by a healthy worker on a loaded 2-core
# machine (its heartbeat thread starved while two test processes trained beside it), which aborted a run that
# then finished well. A worker that really dies closes its connections, and its peers notice that at once.
HEARTBEAT_TIMEOUT_SECONDS = 60


def split_cpu(num_devices):
    """Makes `num_devices` logical CPU devices. Must run before TensorFlow creates any tensor."""
    if num_devices <= 1:
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)
    except RuntimeError as e:  # The runtime is already initialised: fine only if the split is already there.
        if len(tf.config.list_logical_devices("CPU")) != num_devices:
            raise errors.T2TRelposError(f"cannot split the CPU into {num_devices} devices: {e}") from None


def make_strategy(name="auto"):
    """Returns the strategy called `name`.

    - `auto`: MirroredStrategy over all GPUs when there are several, else one device (GPU if any).
    - `one_device`: the first GPU, or the CPU.
    - `mirrored`: synchronous data parallelism over all local GPUs (or all logical CPUs when there is no GPU).
    - `multi_worker`: MultiWorkerMirroredStrategy across the machines described by `TF_CONFIG`.
    """
    if name == "multi_worker":  # Before anything lists logical devices: that would initialise the runtime.
        return _multi_worker_strategy()
    gpus = tf.config.list_logical_devices("GPU")
    cpus = tf.config.list_logical_devices("CPU")
    if name == "auto":
        name = "mirrored" if len(gpus) > 1 else "one_device"
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else cpus[0].name)
    if name == "mirrored":
        devices = [d.name for d in (gpus or cpus)]
        return tf.distribute.MirroredStrategy(devices)
    raise errors.UnknownNameError(errors.unknown_name_message("distribution", name, DISTRIBUTIONS))


def _multi_worker_strategy():
    if "TF_CONFIG" not in os.environ:
        raise errors.T2TRelposError("--distribution=multi_worker needs TF_CONFIG describing the cluster, "
                                    'e.g. {"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
                                    '"task": {"type": "worker", "index": 0}}')
    check_tf_config(os.environ["TF_CONFIG"])
    _configure_coordination()
    return tf.distribute.MultiWorkerMirroredStrategy()


_TF_CONFIG_EXAMPLE = ('e.g. {"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
                      '"task": {"type": "worker", "index": 0}}')
# TF_CONFIG's entries, as TensorFlow and its Estimator read them.
_TF_CONFIG_KEYS = ("cluster", "task", "rpc_layer", "environment", "session_master")
# The jobs a MultiWorkerMirroredStrategy run has: TensorFlow takes any other (a "ps", a misspelt "workers") or a
# task type missing from the cluster for a cluster of its own, and the worker trains alone, or fails in a
# KeyError ('evaluator') or a ValueError (an index past the end).
_JOBS = ("chief", "worker")


def check_tf_config(text):
    """Returns TF_CONFIG's `text` parsed, or raises `T2TRelposError` in one line where it does not describe a
    cluster of `chief`/`worker` tasks and this process's task in it.

    TensorFlow reads a TF_CONFIG of another shape (a list, a misspelt "cluster") as no cluster at all: the
    process then trained alone and said so only in "with 1 replica(s)".
    """
    def fail(what):
        raise errors.T2TRelposError(f"TF_CONFIG {what}; --distribution=multi_worker needs the cluster and this "
                                    f"process's task in it, {_TF_CONFIG_EXAMPLE}")

    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise errors.T2TRelposError(f"TF_CONFIG is not valid JSON: {e}") from None
    if not isinstance(config, dict):
        fail(f"is a JSON {_json_kind(config)}, not an object")
    for key in sorted(config):
        if key not in _TF_CONFIG_KEYS:
            matches = errors.close_matches(key, _TF_CONFIG_KEYS, n=1)
            fail(f"has an unknown entry {key!r}" + (f" (did you mean {matches[0]!r}?)" if matches else ""))
    cluster, task = config.get("cluster"), config.get("task")
    if not isinstance(cluster, dict) or not cluster:
        fail("has no 'cluster'" if cluster is None else f"'cluster' is {cluster!r}, not an object of jobs and their "
             "addresses")
    for job, addresses in sorted(cluster.items()):
        if job not in _JOBS:
            fail(f"'cluster' has a job {job!r}, but this trainer's cluster has 'chief' and 'worker' tasks only "
                 "(every task trains, and the chief, or else worker 0, writes the run and evaluates)")
        if not (isinstance(addresses, list) and addresses and
                all(isinstance(a, str) and a.strip() for a in addresses)):
            fail(f"'cluster' job {job!r} is {addresses!r}, not a list of 'host:port' addresses")
    if len(cluster.get("chief", ())) > 1:
        fail(f"'cluster' has {len(cluster['chief'])} 'chief' tasks; there is one at most")
    if not isinstance(task, dict):
        fail("has no 'task'" if task is None else f"'task' is {task!r}, not an object")
    kind, index = task.get("type"), task.get("index")
    if isinstance(index, str) and index.strip().isdigit():  # TensorFlow reads it with int().
        index = int(index)
    if kind not in _JOBS:
        fail(f"'task' has type {kind!r}, but this trainer runs 'chief' and 'worker' tasks only (it evaluates on the "
             "chief, or else on worker 0)")
    if kind not in cluster:
        fail(f"'task' has type {kind!r}, which is not a job of its 'cluster' ({', '.join(sorted(cluster))})")
    if index is None:
        fail("'task' has no 'index'")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(cluster[kind]):
        fail(f"'task' has index {index!r}, out of range for the {kind!r} job's {len(cluster[kind])} task(s) (0 to "
             f"{len(cluster[kind]) - 1})")
    return config


def _json_kind(value):
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(value), "null")


def _configure_coordination():
    """Makes every worker wait for the others when it exits, and tolerate a worker that is slow to answer.

    MultiWorkerMirroredStrategy starts TensorFlow's coordination service on the first worker; when that worker
    exits before the others, they report `StartAbort UNAVAILABLE ...` although the run ended well. The same
    error follows a worker whose heartbeat is late (`HEARTBEAT_TIMEOUT_SECONDS`). TensorFlow has no public API
    for these settings, so this configures the service as the strategy would, plus the heartbeat timeout and a
    shutdown barrier; it must run before the runtime starts, and the strategy then uses it. (The shutdown
    barrier does not hold a process that ends through Python's normal exit: `leave_together` does that.)
    """
    # pylint: disable=import-outside-toplevel
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.distribute import multi_worker_util
    from tensorflow.python.eager import context

    cluster = tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec()
    jobs = [coordination_config_pb2.CoordinatedJob(name=job, num_tasks=cluster.num_tasks(job))
            for job in ("chief", "worker") if job in cluster.jobs]
    if not jobs:
        return
    context.context().configure_coordination_service(
        service_type="standalone", service_leader=multi_worker_util.coordination_leader(cluster),
        coordinated_jobs=jobs, shutdown_barrier_timeout_in_ms=SHUTDOWN_BARRIER_SECONDS * 1000,
        heartbeat_timeout_in_ms=HEARTBEAT_TIMEOUT_SECONDS * 1000)


def leave_together(strategy):
    """Returns once every worker of a multi-worker run has called it (at once off multi-worker).

    The first worker hosts the coordination service: if it exits while another is still at work (say, its last
    evaluation), that one's next heartbeat finds nobody and it logs `StartAbort UNAVAILABLE ... Connection
    refused`. Called by every worker as its last act, this keeps the first one up until all are done.

    Raises:
        T2TRelposError: when another worker stops sending heartbeats before it gets here (it died, or the
            network failed), or does not get here within `END_OF_RUN_SECONDS`.
    """
    if not is_multi_worker(strategy):
        return
    from tensorflow.python.eager import context  # pylint: disable=import-outside-toplevel

    try:
        context.context().wait_at_barrier("t2t_relpos_end_of_run", END_OF_RUN_SECONDS * 1000)
    except tf.errors.OpError as e:
        raise errors.T2TRelposError(
            f"another worker did not reach the end of the run ({type(e).__name__}: it stopped, or the network "
            f"failed; a live worker is waited for up to {END_OF_RUN_SECONDS} s)") from None


def is_multi_worker(strategy):
    """True when `strategy` spans several processes."""
    return (getattr(strategy, "cluster_resolver", None) is not None and
            getattr(strategy.extended, "_in_multi_worker_mode", lambda: False)())


def is_chief(strategy):
    """True on the worker that writes checkpoints and summaries (always, off multi-worker)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if not is_multi_worker(strategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type in (None, "chief") or (task_type == "worker" and task_id == 0 and
                                              "chief" not in resolver.cluster_spec().as_dict())
