#!/bin/bash
# Writes zoo.cfg from the official zookeeper image's variables (ZOO_SERVERS is a
# space-separated list of "server.N=host:2888:3888;2181"), then runs the command.
set -euo pipefail
: "${ZOO_DATA_DIR:=/data}" "${ZOO_DATA_LOG_DIR:=/datalog}"
{
    echo "dataDir=$ZOO_DATA_DIR"
    echo "dataLogDir=$ZOO_DATA_LOG_DIR"
    echo "tickTime=${ZOO_TICK_TIME:-2000}"
    echo "initLimit=${ZOO_INIT_LIMIT:-5}"
    echo "syncLimit=${ZOO_SYNC_LIMIT:-2}"
    echo "maxClientCnxns=${ZOO_MAX_CLIENT_CNXNS:-60}"
    echo "autopurge.snapRetainCount=${ZOO_AUTOPURGE_SNAPRETAINCOUNT:-3}"
    echo "autopurge.purgeInterval=${ZOO_AUTOPURGE_PURGEINTERVAL:-0}"
    echo "standaloneEnabled=${ZOO_STANDALONE_ENABLED:-true}"
    echo "admin.enableServer=${ZOO_ADMINSERVER_ENABLED:-true}"
    echo "4lw.commands.whitelist=${ZOO_4LW_COMMANDS_WHITELIST:-srvr}"
    if [ -n "${ZOO_SERVERS:-}" ]; then
        for server in $ZOO_SERVERS; do echo "$server"; done
    else
        echo "clientPort=2181"
    fi
} > /etc/zookeeper/conf/zoo.cfg
echo "${ZOO_MY_ID:-1}" > "$ZOO_DATA_DIR/myid"
exec "$@"
