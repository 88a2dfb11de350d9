#!/usr/bin/env python3
"""A GATT peripheral for the real-radio tests, served by bluetoothd over its D-Bus GATT API (org.bluez.GattManager1).

Battery Service (Battery Level) and Device Information (Manufacturer Name, Model Number, Firmware Revision) on the
adapter given. How reads are answered is read from MODE_FILE at every read, so that a test can change it while the
peripheral runs:
  ok          every read answers its value
  refuse      every read answers org.bluez.Error.NotPermitted (ATT Read Not Permitted)
  silent      reads are answered 6 s late, after the agent has given up
Each read is appended to READ_LOG as "<uuid> <mode>".

Usage: gatt-peripheral.py ADAPTER MODE_FILE READ_LOG
"""
import sys

import dbus
import dbus.exceptions
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

BLUEZ = "org.bluez"
OBJECT_MANAGER = "org.freedesktop.DBus.ObjectManager"
PROPERTIES = "org.freedesktop.DBus.Properties"
SERVICE = "org.bluez.GattService1"
CHARACTERISTIC = "org.bluez.GattCharacteristic1"
ROOT = "/org/beaconflow/radio"

adapter, mode_file, read_log = sys.argv[1:4]


class NotPermitted(dbus.exceptions.DBusException):
    _dbus_error_name = "org.bluez.Error.NotPermitted"


class Characteristic(dbus.service.Object):
    def __init__(self, bus, path, service, uuid, value):
        super().__init__(bus, path)
        self.path, self.service, self.uuid, self.value = path, service, uuid, value

    def properties(self):
        return {CHARACTERISTIC: {
            "Service": dbus.ObjectPath(self.service),
            "UUID": self.uuid,
            "Flags": dbus.Array(["read"], signature="s"),
        }}

    @dbus.service.method(CHARACTERISTIC, in_signature="a{sv}", out_signature="ay",
                         async_callbacks=("reply", "error"))
    def ReadValue(self, options, reply, error):
        with open(mode_file) as f:
            mode = f.read().strip()
        with open(read_log, "a") as f:
            f.write(f"{self.uuid} {mode}\n")
        if mode == "refuse":
            error(NotPermitted("read not permitted"))
        elif mode == "silent":
            # Never answering at all would hold bluetoothd's queue for this attribute until D-Bus gives up.
            GLib.timeout_add_seconds(6, lambda: reply(dbus.Array(self.value, signature="y")) and False)
        else:
            reply(dbus.Array(self.value, signature="y"))


class Service(dbus.service.Object):
    def __init__(self, bus, index, uuid, values):
        self.path = f"{ROOT}/service{index}"
        super().__init__(bus, self.path)
        self.uuid = uuid
        self.characteristics = [
            Characteristic(bus, f"{self.path}/char{number}", self.path, characteristic, value)
            for number, (characteristic, value) in enumerate(values)
        ]

    def properties(self):
        return {SERVICE: {"UUID": self.uuid, "Primary": True}}


class Application(dbus.service.Object):
    def __init__(self, bus):
        super().__init__(bus, ROOT)
        self.services = [
            Service(bus, 0, "180f", [("2a19", [87])]),
            Service(bus, 1, "180a", [
                ("2a29", list(b"beaconflow test")),
                ("2a24", list(b"RT-1")),
                ("2a26", list(b"1.2.3")),
            ]),
        ]

    @dbus.service.method(OBJECT_MANAGER, out_signature="a{oa{sa{sv}}}")
    def GetManagedObjects(self):
        objects = {}
        for service in self.services:
            objects[dbus.ObjectPath(service.path)] = service.properties()
            for characteristic in service.characteristics:
                objects[dbus.ObjectPath(characteristic.path)] = characteristic.properties()
        return objects


def main():
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    application = Application(bus)
    manager = dbus.Interface(bus.get_object(BLUEZ, f"/org/bluez/{adapter}"), "org.bluez.GattManager1")
    loop = GLib.MainLoop()

    def registered():
        print("registered", flush=True)

    def failed(error):
        print(f"registration failed: {error}", flush=True)
        loop.quit()

    manager.RegisterApplication(dbus.ObjectPath(ROOT), {}, reply_handler=registered, error_handler=failed)
    loop.run()


main()
