"""The generated sandbox behind `sluice demo`."""
