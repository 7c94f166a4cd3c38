"""The campaign: the loop, its workers and their supervision, the database, progress, the reduce queue, the probe."""
