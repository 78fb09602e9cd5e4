package jobid

import (
	"fmt"
	"unicode/utf8"
)

// emojiTable is the RFC 19 emoji digit table: 576 emoji from the Unicode
// 6.0 set, all encoded as four UTF-8 bytes starting F0 9F, in CLDR order.
// The emoji at position i is the digit with value i.
const emojiTable = "" +
	"😃😄😁😆😅😂😉😊😍😘😚😋" +
	"😜😝😏😒😌😔😪😷😵😲😳😨" +
	"😰😥😢😭😱😖😣😞😓😩😫😤" +
	"😡😠👿💀💩👹👺👻👽👾😺😸" +
	"😹😻😼😽🙀😿😾🙈🙉🙊💌💘" +
	"💝💖💗💓💞💕💟💔💛💚💙💜" +
	"💋💯💢💥💫💦💨💬💤👋👌👈" +
	"👉👆👇👍👎👊👏🙌👐🙏💅💪" +
	"👂👃👀👅👄👶👦👧👱👨👩👴" +
	"👵🙍🙎🙅🙆💁🙋🙇👮💂👷👸" +
	"👳👲👰👼🎅💆💇🚶🏃💃👯🏂" +
	"🏄🏊🛀👫💏💑👪👤👣🐵🐒🐶" +
	"🐩🐺🐱🐯🐴🐎🐮🐷🐗🐽🐑🐫" +
	"🐘🐭🐹🐰🐻🐨🐼🐾🐔🐣🐤🐥" +
	"🐦🐧🐸🐢🐍🐲🐳🐬🐟🐠🐡🐙" +
	"🐚🐌🐛🐜🐝🐞💐🌸💮🌹🌺🌻" +
	"🌼🌷🌱🌴🌵🌾🌿🍀🍁🍂🍃🍄" +
	"🍇🍈🍉🍊🍌🍍🍎🍏🍑🍒🍓🍅" +
	"🍆🌽🌰🍞🍖🍗🍔🍟🍕🍳🍲🍱" +
	"🍘🍙🍚🍛🍜🍝🍠🍢🍣🍤🍥🍡" +
	"🍦🍧🍨🍩🍪🎂🍰🍫🍬🍭🍮🍯" +
	"🍵🍶🍷🍸🍹🍺🍻🍴🔪🌏🗾🌋" +
	"🗻🏠🏡🏢🏣🏥🏦🏨🏩🏪🏫🏬" +
	"🏭🏯🏰💒🗼🗽🌁🌃🌄🌅🌆🌇" +
	"🌉🎠🎡🎢💈🎪🚃🚄🚅🚇🚉🚌" +
	"🚑🚒🚓🚕🚗🚙🚚🚲🚏🚨🚥🚧" +
	"🚤🚢💺🚀🕛🕐🕑🕒🕓🕔🕕🕖" +
	"🕗🕘🕙🕚🌑🌓🌔🌕🌙🌛🌟🌠" +
	"🌌🌀🌈🌂🔥💧🌊🎃🎄🎆🎇🎈" +
	"🎉🎊🎋🎍🎎🎏🎐🎑🎀🎁🎫🏆" +
	"🏀🏈🎾🎳🎣🎽🎿🎯🔫🎱🔮🎮" +
	"🎰🎲🃏🀄🎴🎭🎨👓👔👕👖👗" +
	"👘👙👚👛👜👝🎒👞👟👠👡👢" +
	"👑👒🎩🎓💄💍💎🔊📢📣🔔🎼" +
	"🎵🎶🎤🎧📻🎷🎸🎹🎺🎻📱📲" +
	"📞📟📠🔋🔌💻💽💾💿📀🎥🎬" +
	"📺📷📹📼🔍🔎💡🔦🏮📔📕📖" +
	"📗📘📙📚📓📒📃📜📄📰📑🔖" +
	"💰💴💵💸💳💹📧📨📩📤📥📦" +
	"📫📪📮📝💼📁📂📅📆📇📈📉" +
	"📊📋📌📍📎📏📐🔒🔓🔏🔐🔑" +
	"🔨💣🔧🔩🔗📡💉💊🚪🚽🚬🗿" +
	"🏧🚹🚺🚻🚼🚾🚫🚭🔞🔃🔙🔚" +
	"🔛🔜🔝🔯🔼🔽🎦📶📳📴💱💲" +
	"🔱📛🔰🔟🔠🔡🔢🔣🔤🆎🆑🆒" +
	"🆓🆔🆕🆖🆗🆘🆙🆚🈁🈶🈯🉐" +
	"🈹🈚🈲🉑🈸🈴🈳🈺🈵🔴🔵🔶" +
	"🔷🔸🔹🔺🔻💠🔘🔳🔲🏁🚩🎌"

const (
	emojiBase      = 576
	emojiBytes     = 4
	emojiMaxDigits = 7 // 576^7 > 2^64
	emojiFirstRune = 0x1F000
	emojiRuneSpan  = 0x800 // every table rune lies in [0x1F000, 0x1F800)
)

// emojiValue maps rune-emojiFirstRune to digit value+1 (0: not a digit).
var emojiValue = func() (t [emojiRuneSpan]uint16) {
	i := 0
	for _, r := range emojiTable {
		t[r-emojiFirstRune] = uint16(i + 1)
		i++
	}
	return t
}()

// encodeEmoji returns id in base 576, most significant digit first.
func encodeEmoji(id ID) string {
	var digits [emojiMaxDigits]uint16
	n := 0
	v := uint64(id)
	for {
		digits[n] = uint16(v % emojiBase)
		n++
		v /= emojiBase
		if v == 0 {
			break
		}
	}
	buf := make([]byte, 0, n*emojiBytes)
	for i := n - 1; i >= 0; i-- {
		off := int(digits[i]) * emojiBytes
		buf = append(buf, emojiTable[off:off+emojiBytes]...)
	}
	return string(buf)
}

// decodeEmoji accepts one or more emoji digits from the table.
func decodeEmoji(s string) (ID, string) {
	if s == "" {
		return 0, "empty string"
	}
	var v uint64
	for pos := 1; s != ""; pos++ {
		r, size := utf8.DecodeRuneInString(s)
		var d uint16
		if size == emojiBytes && r >= emojiFirstRune && r < emojiFirstRune+emojiRuneSpan {
			d = emojiValue[r-emojiFirstRune]
		}
		if d == 0 {
			return 0, fmt.Sprintf("emoji encoding: character %d is not in the RFC 19 emoji table", pos)
		}
		if v > (1<<64-1-uint64(d-1))/emojiBase {
			return 0, "emoji value exceeds 64 bits"
		}
		v = v*emojiBase + uint64(d-1)
		s = s[size:]
	}
	return ID(v), ""
}
