#!/usr/bin/env python3
"""Embed a text file as a NUL-terminated C string: embed.py IN OUT SYMBOL."""
import sys

data = open(sys.argv[1], "rb").read()
with open(sys.argv[2], "w") as f:
    f.write("/* generated from %s; do not edit */\n" % sys.argv[1].rsplit("/", 1)[-1])
    f.write("const char %s[] =\n" % sys.argv[3])
    for i in range(0, len(data), 16):
        f.write('\t"' + "".join("\\x%02x" % b for b in data[i:i + 16]) + '"\n')
    f.write(";\n")
