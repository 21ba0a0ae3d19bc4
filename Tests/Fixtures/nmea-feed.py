# A GPS receiver for gpsd in the tests: NMEA 0183 ($GPRMC and $GPGGA, with their checksums) five
# times a second on a pseudo-terminal whose name it prints first, for a fix that starts at
# LATITUDE,LONGITUDE and moves north at SPEED m/s. gpsd reads it as it reads a USB receiver.
#
#   python3 nmea-feed.py LATITUDE LONGITUDE SPEED
import os, pty, sys, time

def sentence(body):
    checksum = 0
    for byte in body.encode():
        checksum ^= byte
    return "$%s*%02X\r\n" % (body, checksum)

def degrees(value, width):
    whole = int(abs(value))
    return "%0*d%07.4f" % (width, whole, (abs(value) - whole) * 60)

latitude, longitude, speed = (float(value) for value in sys.argv[1:4])
master, slave = pty.openpty()
print(os.ttyname(slave), flush=True)
start = time.monotonic()
while True:
    now = time.monotonic() - start
    north = latitude + speed * now / 111194.9  # metres per degree of latitude
    clock = time.time()
    hms = time.strftime("%H%M%S", time.gmtime(clock)) + ".%02d" % int((clock % 1) * 100)
    dmy = time.strftime("%d%m%y", time.gmtime(clock))
    position = "%s,%s,%s,%s" % (degrees(north, 2), "N" if north >= 0 else "S", degrees(longitude, 3), "E" if longitude >= 0 else "W")
    rmc = "GPRMC,%s,A,%s,%.2f,0.0,%s,,,A" % (hms, position, speed * 1.943844, dmy)  # knots
    gga = "GPGGA,%s,%s,1,08,0.9,35.0,M,47.0,M,," % (hms, position)
    os.write(master, (sentence(rmc) + sentence(gga)).encode())
    time.sleep(0.2)
