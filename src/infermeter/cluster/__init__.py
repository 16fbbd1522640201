"""`bench --cluster`: a sweep spread over the nodes of a Ray cluster (the optional `cluster` extra).

Each plan item, or each interleaved comparison group as one unit, runs as one Ray task on one node, through the same
sweep machinery as a local run (build stage, isolated workers, interleaved rounds) inside that task
(`cluster.task`). A task needs the node's one `infermeter_slot`, so no two cases ever share a node's CPUs. The
driver (`cluster.driver`) owns the results file and writes it as each task returns; a node that dies under a task
loses it, and the task is tried once more on another node of the same class. `cluster.session` connects and
checks what the cluster offers; `cluster.units` cuts the plan into tasks. Nothing here is imported, and Ray is never
imported, unless `--cluster` is given.
"""

# The custom resource of which every node offers one (`ray start --resources '{"infermeter_slot": 1}'`): a task
# holds it for its whole unit, so a node runs one case (or one interleaved group) at a time.
SLOT_RESOURCE = "infermeter_slot"
# The node label that names a node's machine class (`ray start --labels infermeter.io/machine=xeon-amx`).
MACHINE_LABEL = "infermeter.io/machine"
# Ray's own label on every node: its id (a selector `!ID` keeps a retried task off the node that lost it).
NODE_ID_LABEL = "ray.io/node-id"
