"""MIG-aware packing: the profiles a GPU can be split into, where each may start, what the
NVIDIA device plugin advertises, and fragmentation counted per profile."""
