"""Several identical workstations seen as one fleet: the fleet file (fleetfile), a Prometheus server that
scrapes every host's exporter (prometheus), and the fleet's state read back through PromQL (query).

Blocks of a design placed on the fleet's hosts through Ray are frank.experiments.placement's job; this
package only knows hosts, addresses and metrics, and imports neither Ray nor the experiments.
"""
