"""Turkish text for synthetic pages: names, places, companies, products, prose, money and dates.

Everything is drawn from word lists in this module with a `random.Random`, so a
seed gives the same text on every machine and library version (Faker's output
changes between its releases; ours only when this file changes).  Amounts in
words come from num2words (`lang="tr"`), the one outside source.
"""

from __future__ import annotations

import datetime as dt
import random
import uuid

from num2words import num2words

from ocr_app.synth.lexicon import dictionary_words

FIRST_NAMES = (
    "Ahmet", "Mehmet", "Ayşe", "Fatma", "Emine", "Hüseyin", "İbrahim", "Zeynep", "Elif", "Mustafa", "Özge", "Çağla",
    "Gökhan", "Şule", "Ümit", "Gülşen", "Ilgın", "Işık", "Ömer", "Büşra", "Tuğçe", "Barış", "Cansu", "Doğan",
    "Eşref", "Feride", "Görkem", "Hülya", "İpek", "Kübra", "Levent", "Müge", "Nurgül", "Oğuz", "Pınar", "Serdar",
    "Şebnem", "Tülin", "Uğur", "Yağmur", "Zehra", "Çetin", "Gönül", "Sıla", "Ilkay", "Ertuğrul",
)
LAST_NAMES = (
    "Yılmaz", "Kaya", "Demir", "Şahin", "Çelik", "Yıldız", "Yıldırım", "Öztürk", "Aydın", "Özdemir", "Arslan",
    "Doğan", "Kılıç", "Aslan", "Çetin", "Kara", "Koç", "Kurt", "Özkan", "Şimşek", "Polat", "Erdoğan", "Güneş",
    "Akgül", "Uçar", "Türkmen", "Işıklı", "Gündüz", "Çakır", "Büyükkaya", "Söğüt", "Ilıcak", "Ağaoğlu", "İnce",
)
CITIES = (
    "İstanbul", "Ankara", "İzmir", "Bursa", "Antalya", "Konya", "Gaziantep", "Şanlıurfa", "Kocaeli", "Mersin",
    "Diyarbakır", "Kayseri", "Eskişehir", "Samsun", "Denizli", "Çanakkale", "Muğla", "Tekirdağ", "Ağrı", "Iğdır",
    "Çorum", "Kırşehir", "Düzce", "Uşak", "Niğde", "Elazığ", "Şırnak", "Gümüşhane",
)
DISTRICTS = (
    "Kadıköy", "Üsküdar", "Beşiktaş", "Çankaya", "Keçiören", "Karşıyaka", "Bornova", "Nilüfer", "Muratpaşa",
    "Selçuklu", "Şahinbey", "İzmit", "Yenişehir", "Tepebaşı", "Atakum", "Pamukkale", "Bodrum", "Çorlu", "Ataşehir",
)
STREETS = (
    "Atatürk Caddesi", "İstiklal Caddesi", "Cumhuriyet Mahallesi", "Gül Sokak", "Çınar Sokak", "Şehitler Caddesi",
    "Menekşe Sokak", "Bağdat Caddesi", "İnönü Bulvarı", "Gazi Mustafa Kemal Bulvarı", "Değirmen Sokak",
    "Yıldız Mahallesi", "Fıstıklı Sokak", "Işıklar Caddesi", "Üniversite Caddesi", "Çiçek Pazarı Sokak",
)
COMPANY_WORDS = (
    "Anadolu", "Boğaziçi", "Ege", "Karadeniz", "Doğuş", "Yıldız", "Güneş", "Öncü", "Çağdaş", "Işık", "Ufuk",
    "Kardeşler", "Türkoğlu", "Şimşek", "Özgür", "Mavi", "Altınbaş", "Gökkuşağı", "Çınar", "İlke",
)
COMPANY_TRADES = (
    "Gıda", "Tekstil", "İnşaat", "Yazılım", "Lojistik", "Mobilya", "Kırtasiye", "Elektrik", "Tarım", "Ambalaj",
    "Otomotiv", "Bilişim", "Danışmanlık", "Matbaacılık", "Soğutma", "İthalat İhracat",
)
COMPANY_FORMS = ("Ltd. Şti.", "A.Ş.", "San. ve Tic. Ltd. Şti.", "Tic. A.Ş.")
TAX_OFFICES = (
    "Kadıköy", "Boğaziçi Kurumlar", "Çankaya", "Karşıyaka", "Nilüfer", "Marmara Kurumlar", "Ulus", "Şişli", "Göztepe",
)
PRODUCTS = (
    ("A4 fotokopi kağıdı", "koli"), ("Tükenmez kalem", "adet"), ("Laptop çantası", "adet"),
    ("Çay (1 kg)", "paket"), ("Türk kahvesi", "paket"), ("Zeytinyağı 5 lt", "teneke"), ("Şeker", "kg"),
    ("Ofis sandalyesi", "adet"), ("Çalışma masası", "adet"), ("Yazılım lisansı", "adet"),
    ("Danışmanlık hizmeti", "saat"), ("Nakliye bedeli", "sefer"), ("Kablosuz fare", "adet"),
    ("Güç kaynağı", "adet"), ("Temizlik malzemesi", "set"), ("Pamuklu gömlek", "adet"), ("Deri ayakkabı", "çift"),
    ("Bakım ve onarım", "saat"), ("Ağ anahtarı (switch)", "adet"), ("Dolum hizmeti", "adet"),
    ("Süt ürünleri", "kg"), ("Öğle yemeği", "kişi"), ("Kırmızı mercimek", "kg"), ("Yağlı boya", "kutu"),
)
RECEIPT_ITEMS = (
    "EKMEK", "SÜT 1 LT", "YUMURTA 10'LU", "BEYAZ PEYNİR", "ÇAY 500 GR", "DOMATES", "SALATALIK", "ŞEKER 1 KG",
    "PİRİNÇ 1 KG", "MAKARNA", "AYÇİÇEK YAĞI", "DETERJAN", "KAĞIT HAVLU", "SU 1,5 LT", "YOĞURT", "ZEYTİN",
    "SİMİT", "ÇİKOLATA", "KÖFTE", "ÜZÜM", "ISPANAK", "SOĞAN",
)
ARTICLE_TITLES = (
    "Şehirlerde Toplu Taşımanın Geleceği", "Kırsal Kalkınmada Yeni Yaklaşımlar", "Dijital Dönüşüm ve Küçük İşletmeler",
    "Eğitimde Eşit Fırsatlar", "İklim Değişikliği ve Tarım", "Yerel Yönetimlerde Şeffaflık",
    "Sağlıklı Beslenmenin Önemi", "Kültürel Mirasın Korunması", "Gençlik ve İstihdam", "Yenilenebilir Enerji Üzerine",
)
SECTION_TITLES = (
    "Giriş", "Arka Plan", "Yöntem", "Bulgular", "Değerlendirme", "Sonuç", "Öneriler", "Tartışma", "Genel Bakış",
    "Uygulama Örnekleri", "Kaynaklar ve Veriler",
)
LETTER_SUBJECTS = (
    "Sözleşme yenilemesi hakkında", "Ödeme talebi", "Toplantı daveti", "Başvurunuz hakkında", "Bilgi talebi",
    "Teklif mektubu", "Teşekkür", "Kira artışı bildirimi", "Staj başvurusu", "Şikâyet bildirimi",
)
SENTENCES = (
    "Bu belge, taraflar arasında yapılan görüşmelerin özetini içermektedir.",
    "Şirketimiz, müşteri memnuniyetini her zaman ön planda tutmaktadır.",
    "Toplantı önümüzdeki çarşamba günü saat 14.00'te genel müdürlükte yapılacaktır.",
    "Ödemenin en geç ay sonuna kadar yapılması gerekmektedir.",
    "Gerekli belgelerin eksiksiz olarak teslim edilmesini rica ederiz.",
    "Yapılan incelemede herhangi bir usulsüzlüğe rastlanmamıştır.",
    "Öğrencilerin büyük çoğunluğu uzaktan eğitimden memnun olduğunu belirtti.",
    "Kış aylarında ısınma giderleri önemli ölçüde artış göstermiştir.",
    "Bölgedeki çiftçiler, kuraklık nedeniyle üretimin düştüğünü ifade ediyor.",
    "İhracat rakamları geçen yılın aynı dönemine göre yüzde on iki yükseldi.",
    "Çalışma saatleri dışında yapılan başvurular ertesi gün değerlendirilir.",
    "Sözleşmenin süresi, imza tarihinden itibaren bir yıldır.",
    "Ürünlerimiz iki yıl boyunca üretim hatalarına karşı garantilidir.",
    "Gümrük işlemleri tamamlandıktan sonra sevkiyat başlayacaktır.",
    "Kütüphane, hafta içi her gün sabah dokuzdan akşam altıya kadar açıktır.",
    "Şikâyetinizi dikkatle inceledik ve gerekli önlemleri aldık.",
    "Araştırmanın sonuçları, ilçedeki su tüketiminin arttığını gösteriyor.",
    "Öğretmenler, yeni müfredatın uygulanmasında güçlük çektiklerini söyledi.",
    "Faturanın bir kopyası muhasebe birimine iletilmiştir.",
    "Lütfen bu formu doldurduktan sonra imzalayarak geri gönderiniz.",
    "Belediye, parkların bakımı için ek bütçe ayırdığını açıkladı.",
    "Yeni şube, şehrin kuzeyindeki alışveriş merkezinde hizmete girdi.",
    "Işık kirliliği, gökyüzü gözlemlerini giderek zorlaştırmaktadır.",
    "İşçilerin güvenliği için koruyucu ekipman kullanımı zorunludur.",
    "Bu yıl düzenlenen fuara yirmi üç ülkeden katılımcı geldi.",
    "Müşterilerimizin kişisel verileri yasal düzenlemelere uygun olarak saklanır.",
    "Görüşlerinizi bizimle paylaştığınız için teşekkür ederiz.",
    "Açık pozisyonlar için başvurular internet sitemiz üzerinden alınmaktadır.",
    "Doğal gaz kesintisi nedeniyle üretim iki gün süreyle durduruldu.",
    "Ücretsiz kargo kampanyası ay sonuna kadar geçerlidir.",
    "Ağaçlandırma çalışmaları ilkbaharda yeniden başlayacak.",
    "Çocukların okuma alışkanlığı kazanması için ailelere büyük görev düşüyor.",
    "Raporun ekinde son üç yıla ait mali tablolar yer almaktadır.",
    "Güzergâh üzerindeki yol çalışmaları nedeniyle gecikmeler yaşanabilir.",
    "Ülkemizin dört bir yanından gelen gönüllüler etkinliğe katıldı.",
    "İlçe sağlık müdürlüğü, aşı kampanyasının başarıyla tamamlandığını duyurdu.",
    "Şirket yönetimi, çalışanlarına esnek çalışma imkânı sunmayı planlıyor.",
    "Tarihî çarşıdaki dükkânlar restorasyon sonrası yeniden açıldı.",
    "Düzenli egzersiz, kalp ve damar sağlığı için büyük önem taşır.",
    "Öğle arasında çay ve simit ikram edilecektir.",
    "Bu konudaki gelişmeler hakkında sizi bilgilendirmeye devam edeceğiz.",
    "Komisyon, önerilen değişiklikleri oy birliğiyle kabul etti.",
    "Yağışlı havalarda sürücülerin hızlarını düşürmeleri gerekir.",
    "Kayıt yenileme işlemleri eylül ayının ilk haftasında yapılacaktır.",
    "Sergide genç sanatçıların yağlı boya çalışmaları yer alıyor.",
    "Kargo takip numarası kısa mesaj ile tarafınıza iletilecektir.",
    "Hastanenin acil servisi yirmi dört saat hizmet vermektedir.",
    "Yıllık izin talepleri en az iki hafta önceden bildirilmelidir.",
)
MONTHS = (
    "Ocak", "Şubat", "Mart", "Nisan", "Mayıs", "Haziran", "Temmuz", "Ağustos", "Eylül", "Ekim", "Kasım", "Aralık",
)
WORDS = tuple(
    sorted({word.strip(".,;:'()") for sentence in SENTENCES for word in sentence.split()} - {""})
)


def person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"


def company(rng: random.Random) -> str:
    return f"{rng.choice(COMPANY_WORDS)} {rng.choice(COMPANY_TRADES)} {rng.choice(COMPANY_FORMS)}"


def address(rng: random.Random) -> str:
    return (
        f"{rng.choice(STREETS)} No: {rng.randint(1, 180)}/{rng.randint(1, 12)}, "
        f"{rng.choice(DISTRICTS)} / {rng.choice(CITIES)}"
    )


def phone(rng: random.Random) -> str:
    return f"0 (5{rng.randint(30, 59)}) {rng.randint(100, 999)} {rng.randint(10, 99)} {rng.randint(10, 99)}"


def digits(rng: random.Random, count: int) -> str:
    return str(rng.randint(1, 9)) + "".join(str(rng.randint(0, 9)) for _ in range(count - 1))


def date(rng: random.Random) -> dt.date:
    return dt.date(2019, 1, 1) + dt.timedelta(days=rng.randint(0, 2500))


def long_date(day: dt.date) -> str:
    """`5 Mart 2024`."""
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


def short_date(day: dt.date) -> str:
    """`05.03.2024`."""
    return day.strftime("%d.%m.%Y")


def money(kurus: int) -> str:
    """An amount in kuruş as Turkish writes it: `1.234,56` (dot for thousands, comma for decimals)."""
    lira, rest = divmod(kurus, 100)
    return f"{lira:,}".replace(",", ".") + f",{rest:02d}"


def amount(rng: random.Random) -> str:
    """An amount as documents print it, at times with its currency: `42,50 TL`, `1.240,00`, `18,90 ₺`.

    Lira are drawn log-uniform from 1 to 50 000, so two-digit prices are as common as five-digit totals: drawn
    uniform, nearly every amount had five digits of lira, and the model wrote that shape over what it saw
    (samples/fatura.pdf's `42,50 TL` came out `42.500,71`).
    """
    written = money(round(10 ** rng.uniform(2, 6.7)))
    currency = rng.random()
    return f"{written} TL" if currency < 0.3 else f"{written} ₺" if currency < 0.4 else written


def money_in_words(kurus: int) -> str:
    """`Yalnız bin iki yüz otuz dört Türk Lirası elli altı Kuruş` (num2words writes the words joined, as on cheques)."""
    lira, rest = divmod(kurus, 100)
    words = f"Yalnız {num2words(lira, lang='tr')} Türk Lirası"
    return f"{words} {num2words(rest, lang='tr')} Kuruş" if rest else words


def sentence(rng: random.Random) -> str:
    return rng.choice(SENTENCES)


def paragraph(rng: random.Random, sentences: tuple[int, int] = (2, 5)) -> str:
    return " ".join(rng.sample(SENTENCES, rng.randint(*sentences)))


def word(rng: random.Random) -> str:
    """One token as it appears on documents: a word, a name, a place, a number, a date or an amount."""
    source = rng.random()
    if source < 0.55:
        return rng.choice(WORDS)
    if source < 0.7:
        return rng.choice(FIRST_NAMES + LAST_NAMES)
    if source < 0.8:
        return rng.choice(CITIES + DISTRICTS)
    if source < 0.87:
        return amount(rng)
    if source < 0.94:
        return short_date(date(rng))
    return digits(rng, rng.randint(2, 11))


# Invented words follow Turkish spelling: the vowels of a word are all back or all front (vowel harmony),
# syllables are V, CV, VC or CVC, and `ğ` never starts a word.  Frequent consonants are listed more often.
BACK_VOWELS, FRONT_VOWELS = "aıou", "eiöü"
CONSONANTS = "bcçdfgğhjkllmmnnprrsşttvyyzkkdd"
CODE_CHARACTERS = "ABCÇDEFGĞHIİJKLMNOÖPRSŞTUÜVYZ0123456789"


def turkish_upper(text: str) -> str:
    return text.translate(str.maketrans({"i": "İ", "ı": "I"})).upper()


def invented_word(rng: random.Random) -> str:
    """A word that looks Turkish and is in no list: it can only be read letter by letter."""
    vowels = rng.choice((BACK_VOWELS, FRONT_VOWELS))
    letters = []
    for index in range(rng.choices((1, 2, 3, 4), weights=(2, 4, 3, 1))[0]):
        if index or rng.random() < 0.8:
            letters.append(rng.choice(CONSONANTS if index else CONSONANTS.replace("ğ", "")))
        letters.append(rng.choice(vowels))
        if rng.random() < 0.4:
            letters.append(rng.choice(CONSONANTS))
    invented = "".join(letters)
    case = rng.random()
    if case < 0.25:
        return turkish_upper(invented[0]) + invented[1:]
    return turkish_upper(invented) if case < 0.3 else invented


def code(rng: random.Random) -> str:
    """A reference such as `FTR2023K19` or `AB-4Ç7`: letters and digits in no pattern."""
    characters = [rng.choice(CODE_CHARACTERS) for _ in range(rng.randint(3, 10))]
    if len(characters) > 4 and rng.random() < 0.3:
        characters.insert(rng.randint(1, len(characters) - 1), rng.choice("-/."))
    return "".join(characters)


def random_words(rng: random.Random, count: int, lexicon: float = 0.0) -> str:
    """`count` tokens drawn independently: no sentence to recall, so only the image tells them apart.

    Half are invented (`invented_word`, `code`): a model that learnt the few hundred words of the
    documents' lists as whole shapes cannot read them; the other half are `word`'s.  With `lexicon`, that
    share of them are `real_token`'s instead (drawn first; at 0 nothing more is drawn).
    """
    tokens = []
    for _ in range(count):
        if lexicon > 0 and rng.random() < lexicon:
            tokens.append(real_token(rng))
            continue
        source = rng.random()
        tokens.append(word(rng) if source < 0.5 else invented_word(rng) if source < 0.9 else code(rng))
    return " ".join(tokens)


def real_token(rng: random.Random) -> str:
    """A token as real documents hold them: mostly a word of the Turkish dictionary with its suffixes
    (`lexicon.dictionary_words`), at times capitalised or in capitals, else a word or number in the
    punctuation around it (`punctuated`), a name, an amount, a date or an identifier in its real format (IBAN,
    TCKN, VKN, e-Fatura number, ETTN)."""
    source = rng.random()
    words = dictionary_words()
    if source < 0.62 and words:
        drawn = rng.choice(words)
        case = rng.random()
        return turkish_upper(drawn[0]) + drawn[1:] if case < 0.15 else turkish_upper(drawn) if case < 0.22 else drawn
    if source < 0.72:
        return punctuated(rng)
    if source < 0.78:
        return rng.choice((person, company, address))(rng)
    if source < 0.86:
        return priced(rng)
    if source < 0.92:
        return dated(rng)
    return rng.choice((iban, tckn, vkn, invoice_number, ettn))(rng)


# Punctuation as Turkish legislation, letters and invoices set it around words and numbers.  On real pages
# the reader dropped it and the digits beside it ("(Değişik:25/11/2020-7257/12 md.)" came out
# "Değişik33112029729712571 mod", "“biyokütleden" "Tiyüdürlüğe"); the generator's text had little of it.
AMENDMENTS = ("Değişik", "Mülga", "Ek", "Değişik ibare", "Yeniden düzenleme")
QUOTES = (("“", "”"), ('"', '"'), ("‘", "’"), ("'", "'"))
APOSTROPHE_SUFFIXES = ("nın", "nin", "nun", "ın", "in", "da", "de", "ta", "te", "dan", "den", "a", "e", "ya", "ye")
LIST_LETTERS = "abcçdefgğhıijklm"


def punctuated(rng: random.Random) -> str:
    """A word or number in the punctuation real documents set around it: a law's amendment mark
    (`(Değişik: 4/6/2016-6719/13 md.)`), a quoted or bracketed word (`“biyokütle”`, `(ç,d,e)`, `(...)`), a
    suffix after an apostrophe (`Başkanlığı’nın`), a label run into its value (`No:21`, `%18`), a file number
    (`E-75850160-104.01.01.01-11099`, `23/108`), a list's mark (`b)`, `4.`, `1-)`), a form's blank (`blank`), or a
    word before a comma, semicolon or colon."""
    words = dictionary_words()
    drawn = rng.choice(words) if words else word(rng)
    form = rng.randrange(9)
    if form == 0:
        day = date(rng)
        return (f"({rng.choice(AMENDMENTS)}:{rng.choice(('', ' '))}{day.day}/{day.month}/{day.year}-"
                f"{rng.randint(3000, 7600)}/{rng.randint(1, 150)} md.)")
    if form == 1:
        opening, closing = rng.choice(QUOTES)
        return f"{opening}{drawn}{closing}{rng.choice(('', '', ',', '.'))}"
    if form == 2:
        letters = ",".join(sorted(rng.sample(LIST_LETTERS, rng.randint(2, 6)), key=LIST_LETTERS.index))
        return rng.choice((f"({drawn})", "(...)", f"({letters})", f"[{drawn}]", f"({rng.randint(1, 40)})"))
    if form == 3:
        return f"{turkish_upper(drawn[0])}{drawn[1:]}{rng.choice(('’', chr(39)))}{rng.choice(APOSTROPHE_SUFFIXES)}"
    if form == 4:
        return rng.choice((
            f"No:{rng.randint(1, 250)}{rng.choice(('', '', '/A', '/3'))}", f"%{rng.randint(1, 100)}{rng.choice(('', ',00'))}",
            f"Sayı:{rng.randint(1, 99999)}", f"Kat:{rng.randint(1, 12)}", f"Tel:0{digits(rng, 10)}",
        ))
    if form == 5:
        return rng.choice((
            f"E-{digits(rng, 8)}-{rng.randint(100, 999)}.{rng.randint(1, 99):02d}.{rng.randint(1, 99):02d}-{digits(rng, 5)}",
            f"{rng.randint(1, 40)}/{rng.randint(1, 400)}", f"{rng.randint(1990, 2026)}/{rng.randint(1, 999)}",
        ))
    if form == 6:
        return rng.choice((f"{rng.choice(LIST_LETTERS)})", f"{rng.randint(1, 30)}.", f"{rng.randint(1, 30)}-)", f"({rng.choice(LIST_LETTERS)})"))
    if form == 7:
        return blank(rng)
    return f"{drawn}{rng.choice((',', ';', ':', '.'))}"


def blank(rng: random.Random) -> str:
    """A form's or petition's space to fill in: a run of dots 3-60 long, a date's blank (`..../..../20..`) or an
    underline.  Its length is drawn: a reader that has seen only a few lengths writes one of them (a real
    petition's 54 dots came back as ~250).  Dots, not `…`, which the tokenizer lacks."""
    form = rng.randrange(3)
    if form == 0:
        return "." * rng.randint(3, 60)
    if form == 1:
        return f"{'.' * rng.randint(2, 6)}/{'.' * rng.randint(2, 6)}/{rng.choice(('20', '', '202'))}{'.' * rng.randint(2, 4)}"
    return "_" * rng.randint(3, 60)


# Identifiers as Turkish documents print them, with valid check digits: a reader that learnt the shape of a
# listed number would write that one instead of the one on the page.
def iban(rng: random.Random) -> str:
    """A Turkish IBAN (`TR` + 2 check digits + 5-digit bank code + `0` + 16-digit account), in groups of four,
    its check digits by ISO 13616 (mod 97)."""
    bban = f"{rng.choice((10, 12, 15, 46, 62, 64, 67, 111, 134, 205, 206)):05d}0{digits(rng, 16)}"
    # Letters count as 10 + their place in the alphabet: T = 29, R = 27; check digits 00 while computing them.
    check = 98 - int(f"{bban}292700") % 97
    number = f"TR{check:02d}{bban}"
    return " ".join(number[start : start + 4] for start in range(0, len(number), 4)) if rng.random() < 0.7 else number


def tckn(rng: random.Random) -> str:
    """A T.C. Kimlik No: 11 digits, the first not 0, the 10th and 11th its check digits."""
    first = [rng.randint(1, 9)] + [rng.randint(0, 9) for _ in range(8)]
    tenth = (7 * sum(first[0::2]) - sum(first[1::2])) % 10
    eleventh = (sum(first) + tenth) % 10
    return "".join(map(str, first + [tenth, eleventh]))


def vkn(rng: random.Random) -> str:
    """A Vergi Kimlik No: 10 digits, the last its check digit (the tax administration's algorithm)."""
    first = [rng.randint(0, 9) for _ in range(9)]
    total = 0
    for index, digit in enumerate(first):
        shifted = (digit + 9 - index) % 10
        weighted = (shifted * 2 ** (9 - index)) % 9
        total += 9 if shifted != 0 and weighted == 0 else weighted
    return "".join(map(str, first)) + str((10 - total % 10) % 10)


def invoice_number(rng: random.Random, year: int | None = None) -> str:
    """An e-Fatura / e-Arşiv number: a 3-character prefix, the year, a 9-digit sequence (`GİB2026000000417`)."""
    prefix = "".join(rng.choice("ABCDEFGHIJKLMNOPRSTUVYZ0123456789") for _ in range(3))
    return f"{prefix}{year or rng.randint(2018, 2027)}{rng.randint(1, 10**rng.randint(2, 9) - 1):09d}"


def ettn(rng: random.Random) -> str:
    """An e-invoice's ETTN: a version-4 UUID, as printed in lower or upper case."""
    value = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    return value.upper() if rng.random() < 0.3 else value


def priced(rng: random.Random) -> str:
    """An amount in one of the ways invoices and receipts write it: `42,50 TL`, `1.250,00 ₺`, `₺18,90`,
    `USD 12.50`, `€1.234,56`, `12.500 TL`, `2500,00`."""
    kurus = round(10 ** rng.uniform(2, 7))
    turkish = money(kurus)
    english = f"{kurus // 100:,}.{kurus % 100:02d}"
    return rng.choice((
        f"{turkish} TL", f"{turkish} ₺", f"₺{turkish}", f"{turkish} TRY", f"USD {english}", f"${english}",
        f"€{turkish}", f"{turkish} EUR", f"{money(kurus - kurus % 100)[:-3]} TL", turkish.replace(".", ""),
    ))


def dated(rng: random.Random) -> str:
    """A date in one of the ways documents print it: `02.12.2026`, `2/12/2026`, `2026-12-02`, `2 Aralık 2026`,
    `02 ARALIK 2026 Çarşamba`, `02.12.2026 14:35`."""
    day = date(rng)
    return rng.choice((
        short_date(day), f"{day.day}/{day.month}/{day.year}", day.isoformat(), long_date(day),
        turkish_upper(long_date(day)), f"{short_date(day)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}",
        f"{long_date(day)} {WEEKDAYS[day.weekday()]}",
    ))


WEEKDAYS = ("Pazartesi", "Salı", "Çarşamba", "Perşembe", "Cuma", "Cumartesi", "Pazar")
