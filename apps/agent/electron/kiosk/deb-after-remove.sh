#!/bin/bash
# postrm of the kiosk player's deb: what electron-builder's own script does, then the kiosk session and the agent's
# command. The player's folder /var/lib/ooh-player (its keys, its play log, its media) is never removed here.

if type update-alternatives >/dev/null 2>&1; then
    update-alternatives --remove '${executable}' '/usr/bin/${executable}'
else
    rm -f '/usr/bin/${executable}'
fi

rm -f /usr/share/xsessions/ooh-player.desktop
if [ -L /usr/bin/ooh-agent ]; then
    rm -f /usr/bin/ooh-agent
fi
