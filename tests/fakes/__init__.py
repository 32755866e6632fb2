"""Stand-ins for the hardware and the OS: a fake NVML module, fake psutil, fake /proc trees."""
