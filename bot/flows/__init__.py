"""The flows that join the core to the ports: planning, picking, calibration."""
