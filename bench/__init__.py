"""llga's benchmark suite: `/usr/bin/python3 -m bench --help`."""
