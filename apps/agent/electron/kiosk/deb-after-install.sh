#!/bin/bash
# postinst of the kiosk player's deb (electron-builder fills in the names in dollar-braces). What electron-builder's
# own script does (the command in /usr/bin, the Chromium sandbox helper), then the kiosk: the X session, the agent's
# command line and the player's folder.

if type update-alternatives 2>/dev/null >&1; then
    # Remove previous link if it doesn't use update-alternatives
    if [ -L '/usr/bin/${executable}' -a -e '/usr/bin/${executable}' -a "`readlink '/usr/bin/${executable}'`" != '/etc/alternatives/${executable}' ]; then
        rm -f '/usr/bin/${executable}'
    fi
    update-alternatives --install '/usr/bin/${executable}' '${executable}' '/opt/${sanitizedProductName}/${executable}' 100 || ln -sf '/opt/${sanitizedProductName}/${executable}' '/usr/bin/${executable}'
else
    ln -sf '/opt/${sanitizedProductName}/${executable}' '/usr/bin/${executable}'
fi

# Check if user namespaces are supported by the kernel and working with a quick test:
if ! { [[ -L /proc/self/ns/user ]] && unshare --user true; }; then
    # Use SUID chrome-sandbox only on systems without user namespaces:
    chmod 4755 '/opt/${sanitizedProductName}/chrome-sandbox' || true
else
    chmod 0755 '/opt/${sanitizedProductName}/chrome-sandbox' || true
fi

if hash update-desktop-database 2>/dev/null; then
    update-desktop-database /usr/share/applications || true
fi

# The kiosk session: "OOH player (kiosk)" in the display manager, the player alone, restarted when it exits.
chmod 0755 '/opt/${sanitizedProductName}/kiosk/kiosk-session' '/opt/${sanitizedProductName}/kiosk/ooh-agent'
install -d -m 0755 /usr/share/xsessions
install -m 0644 '/opt/${sanitizedProductName}/kiosk/ooh-player-session.desktop' /usr/share/xsessions/ooh-player.desktop
# `ooh-agent init | install | status`, run by the player's own Electron as Node.
ln -sf '/opt/${sanitizedProductName}/kiosk/ooh-agent' /usr/bin/ooh-agent
# The player's folder (agent.json, data/, media/): kept across upgrades and removal; the installer gives it to the
# account the kiosk session runs as (README.md, "The kiosk package").
install -d -m 0755 /var/lib/ooh-player
