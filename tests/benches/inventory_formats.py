#!/usr/bin/env python3
"""Write one inventory in the three formats the inventory plugins read (ini, yaml, toml),
for docs/perf.md's format rows: N hosts in racks of 20, ten racks a site, a variable on
every host line, group_vars for all and per site (a Jinja-derived value, a list, a YAML 1.1
boolean). Usage: inventory_formats.py DIR [N] -> DIR/{ini,yml,toml}/hosts.* + group_vars/.
`ansible-inventory -i DIR/X/hosts.X --list` gives the same JSON for all three."""
import os
import sys

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 600
ini, yml, toml = [], ["all:", "  children:"], []
sites = {}
for r in range(n // 20):
    sites.setdefault(r // 10, []).append(r)
for site, racks in sites.items():
    yml += [f"    site{site}:", "      children:"]
    ini += [f"[site{site}:children]"] + [f"rack{r}" for r in racks] + [""]
    toml += [f"[site{site}]", "children = [" + ", ".join(f'"rack{r}"' for r in racks) + "]", ""]
    for r in racks:
        yml += [f"        rack{r}:", "          hosts:"]
        ini.append(f"[rack{r}]")
        toml.append(f"[rack{r}.hosts]")
        for h in range(20):
            name, addr = f"node{r * 20 + h:04d}", f"10.{site}.{r % 256}.{h + 1}"
            yml.append(f"            {name}: {{ ansible_host: {addr}, rack_slot: {h} }}")
            ini.append(f"{name} ansible_host={addr} rack_slot={h}")
            toml.append(f'{name} = {{ ansible_host = "{addr}", rack_slot = {h} }}')
        ini.append("")
        toml.append("")
for ext, lines in [("ini", ini), ("yml", yml), ("toml", toml)]:
    d = os.path.join(out, ext)
    os.makedirs(os.path.join(d, "group_vars"), exist_ok=True)
    with open(os.path.join(d, f"hosts.{ext}"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(d, "group_vars", "all.yml"), "w") as f:
        f.write("ntp_server: 10.0.0.1\ndns: [10.0.0.2, 10.0.0.3]\n")
    for s in sites:
        with open(os.path.join(d, "group_vars", f"site{s}.yml"), "w") as f:
            f.write(f'site_name: site{s}\nsite_gw: "{{{{ ntp_server }}}}"\nmonitoring: yes\n')
